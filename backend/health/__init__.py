"""Service health: the database, the broker, and the workers seen lately."""
