"""The FastAPI service (routers, schemas, SQLAlchemy models, services); built in issue 4."""
