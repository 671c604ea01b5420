"""Liveness and version endpoints."""
