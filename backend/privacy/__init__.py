"""Privacy projections: a spec's noise multiplier and ε per round, before anything runs."""
