# DP-FL Explorer: one image for the API and the workers (docker-compose.yml runs both).
FROM python:3.11-slim

# PYTHONPATH=/app: the service finds alembic.ini, migrations/ and frontend/ beside its package
# folders (backend/migrate.py, backend/main.py), so it must run from the source tree, not from
# the copy pip puts in site-packages.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml constraints.txt README.md alembic.ini ./
COPY dpfl dpfl
COPY backend backend
COPY worker worker
COPY migrations migrations
COPY frontend frontend

# constraints.txt pins torch==2.13.0; the extra index offers its CPU build (2.13.0+cpu, which
# pip prefers over PyPI's CUDA build). Only the image uses that index, never `make install`.
RUN pip install -c constraints.txt --extra-index-url https://download.pytorch.org/whl/cpu . \
    && useradd --create-home --uid 1000 dpfl

# Nothing here needs root (and Celery warns when a worker runs as root).
USER dpfl
EXPOSE 8000
# `dpfl up` upgrades the database and refuses to bind every interface without DPFL_API_TOKENS
# (uvicorn's own --host would serve writes to anyone). Workers run as `dpfl worker` containers.
CMD ["dpfl", "up", "--host", "0.0.0.0", "--port", "8000", "--workers", "0"]
