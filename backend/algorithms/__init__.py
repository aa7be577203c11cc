"""The algorithm catalogue: what each registered algorithm is, the parameters it takes and what a
spec must give it."""
