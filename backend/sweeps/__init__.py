"""Sweeps: a base spec and a grid of field values, submitted as one run per point and summarised."""
