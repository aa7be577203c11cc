"""The algorithm catalogue: what each registered algorithm is and which parameters it takes."""
