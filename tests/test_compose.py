"""docker-compose.yml runs the commands the tests exercise, with settings the service reads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from fastapi import FastAPI
from pydantic import ValidationError
from typer.testing import CliRunner
from uvicorn.importer import import_from_string

from backend.settings import Settings, get_settings
from dpfl.cli import app as cli

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DATABASE_URL = "postgresql+psycopg://postgres:postgres@postgres:5432/dpfl"
BROKER_URL = "redis://redis:6379/0"


def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def command(service: dict) -> str:
    cmd = service["command"]
    return cmd if isinstance(cmd, str) else " ".join(cmd)


def test_the_stack_is_postgres_redis_api_and_workers():
    s = services()
    assert set(s) == {"postgres", "redis", "api", "worker"}
    assert s["postgres"]["image"] == "postgres:16" and "pg_isready" in str(s["postgres"]["healthcheck"])
    assert s["redis"]["image"] == "redis:7"
    for name in ("api", "worker"):
        for dependency in ("postgres", "redis"):
            assert s[name]["depends_on"][dependency] == {"condition": "service_healthy"}, name
    # scalable: `--scale worker=4` needs no fixed container name or host port
    assert "container_name" not in s["worker"] and "ports" not in s["worker"]


def test_api_upgrades_the_database_then_serves_the_app(tmp_path, monkeypatch):
    cmd = command(services()["api"])
    assert re.fullmatch(
        r"sh -c dpfl db upgrade && exec uvicorn backend\.main:app --host 0\.0\.0\.0 --port 8000", cmd
    ), cmd
    # the two steps of the command, run here on a fresh home: the upgrade, then `backend.main:app`
    # resolved as uvicorn resolves it, which refuses a database that is not migrated
    monkeypatch.setenv("DPFL_HOME", str(tmp_path))
    get_settings.cache_clear()
    try:
        assert CliRunner().invoke(cli, ["db", "upgrade"]).exit_code == 0
        app = import_from_string("backend.main:app")
    finally:
        get_settings.cache_clear()
    assert isinstance(app, FastAPI) and (tmp_path / "dpfl.db").exists()


def test_worker_runs_dpfl_worker():
    assert command(services()["worker"]) == "dpfl worker"
    assert CliRunner().invoke(cli, ["worker", "--help"]).exit_code == 0


@pytest.mark.parametrize("name", ["api", "worker"])
def test_environment_names_are_settings_fields(name):
    env = services()[name]["environment"]
    fields = {f"DPFL_{field.upper()}" for field in Settings.model_fields}
    assert set(env) <= fields, set(env) - fields
    assert env["DPFL_DATABASE_URL"] == DATABASE_URL
    assert env["DPFL_BROKER_URL"] == BROKER_URL


def test_api_binds_all_interfaces_only_with_tokens_from_the_environment():
    env = services()["api"]["environment"]
    assert env["DPFL_HOST"] == "0.0.0.0"
    assert env["DPFL_API_TOKENS"].startswith("${DPFL_API_TOKENS:?")  # compose refuses to start without it
    with pytest.raises(ValidationError, match="set DPFL_API_TOKENS"):
        Settings(host="0.0.0.0", api_tokens="")
    assert Settings(host="0.0.0.0", api_tokens="t0ken").tokens == {"t0ken"}


def test_every_bind_to_all_interfaces_goes_through_the_token_check():
    # uvicorn's --host is not a setting: an image running `uvicorn --host 0.0.0.0` without
    # DPFL_HOST=0.0.0.0 served writes to anyone (issue 17, item 1). The image runs `dpfl up`, whose
    # --host is checked; compose's api runs uvicorn with DPFL_HOST saying the same.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["dpfl", "up", "--host", "0.0.0.0", "--port", "8000", "--workers", "0"]' in dockerfile
    assert "uvicorn" not in dockerfile.split("CMD", 1)[1]
    for name in ("api", "worker"):
        service = services()[name]
        if "--host 0.0.0.0" in command(service):
            assert service["environment"]["DPFL_HOST"] == "0.0.0.0", name


def test_the_cpu_torch_index_is_used_by_the_image_only():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM python:3.11-slim" in dockerfile
    assert re.search(
        r"pip install -c constraints\.txt --extra-index-url https://download\.pytorch\.org/whl/cpu \.",
        dockerfile,
    )
    for own in ("pyproject.toml", "constraints.txt", "Makefile"):
        assert "download.pytorch.org" not in (ROOT / own).read_text(), own


def _compose() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    try:
        done = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [docker, "compose"] if done.returncode == 0 else None


def test_docker_compose_accepts_the_file():
    compose = _compose()
    if compose is None:
        pytest.skip("no `docker compose` here (needs the docker client with its compose plugin)")
    env = os.environ | {"DPFL_API_TOKENS": "t0ken"}
    done = subprocess.run(
        [*compose, "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    env.pop("DPFL_API_TOKENS")
    refused = subprocess.run(
        [*compose, "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "set DPFL_API_TOKENS" in refused.stderr
