"""Datasets: the registry's catalogue with availability on this server, and CSV uploads."""
