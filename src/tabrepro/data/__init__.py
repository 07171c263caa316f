"""Datasets: the registry of sources, verified fetching, parsing into canonical tables."""
