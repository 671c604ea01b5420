"""Pricing one plan: ``POST /v1/estimate`` over ``costmodel.estimate``."""
