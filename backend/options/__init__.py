"""The names a run form offers (models, partition and user kinds, accountants, notions), by registry."""
