"""Cluster specs: the stored ``ClusterSpec`` registry, presets included."""
