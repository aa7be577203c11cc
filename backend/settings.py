"""Service settings: one pydantic-settings class read from DPFL_* environment variables.

Embedded defaults need no server: SQLite and Celery's filesystem transport under DPFL_HOME.
A real deployment points DPFL_DATABASE_URL at Postgres and DPFL_BROKER_URL at Redis.
"""

from __future__ import annotations

import functools
import ipaddress
import os
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    """Everything the API and the workers read from the environment (prefix DPFL_)."""

    model_config = SettingsConfigDict(env_prefix="DPFL_", extra="ignore")

    home: Path = Field(Path("~/.dpfl"), description="data folder of the embedded mode")
    database_url: str = Field("", description="SQLAlchemy URL; default SQLite in DPFL_HOME")
    broker_url: str = Field("", description="Celery broker; default the filesystem transport in DPFL_HOME")
    api_tokens: str = Field("", description="comma-separated bearer tokens; when set, writes need one")
    data_dir: str = Field("", description="folders with dataset files (os.pathsep-separated)")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    max_rounds: int = Field(2000, ge=1, description="largest `rounds` a submitted run may ask for")
    max_silos: int = Field(500, ge=1)
    max_sweep_points: int = Field(500, ge=1)
    batch_runs: int = Field(
        8, ge=1, description="most runs of a sweep that train together in one worker task (1: each alone)"
    )
    max_upload_bytes: int = Field(50_000_000, ge=1)
    max_body_bytes: int = Field(
        1_000_000, ge=1, description="largest request body but an upload's; a larger one gets 413 unread"
    )
    max_party_rounds: int = Field(
        100_000, ge=1, description="largest rounds × silos a run may ask for: what its ε projection accounts"
    )
    projection_timeout_s: float = Field(
        30.0, ge=0, description="longest a privacy projection may take in the API; 0: unbounded, in-process"
    )
    projection_processes: int = Field(
        2, ge=1, le=64, description="projection processes the API keeps warm; a slow projection holds one"
    )
    projection_memory_mb: int = Field(
        2048, ge=0, description="address space of the projection process; 0: unlimited"
    )
    heartbeat_timeout_s: float = Field(60.0, gt=0, description="a running run silent this long is re-queued")
    dispatch_timeout_s: float = Field(
        60.0, gt=0, description="a queued run whose message is this old and not in the broker is sent again"
    )
    sqlite_busy_timeout_s: float = Field(
        30.0, gt=0, description="SQLite: how long a write waits for another writer before it retries"
    )
    max_attempts: int = Field(3, ge=1, description="deliveries of a run before it fails as lost")
    max_open_audits: int = Field(4, ge=1, description="audits queued or running at once, over all runs")
    audit_timeout_s: float = Field(3600.0, gt=0, description="longest one audit may take in its worker")
    audit_memory_mb: int = Field(
        8192, ge=0, description="address space of the process an audit runs in; 0: unlimited"
    )
    device: str = Field(
        "auto",
        pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$",
        description="where the worker's runs compute: auto (CUDA if present), cpu, cuda, cuda:<index>",
    )
    run_time_limit_s: int = Field(6 * 3600, ge=60)
    torch_threads: int = Field(
        0, ge=0, description="torch threads per run; 0: this machine's cores shared among the worker's runs"
    )

    @model_validator(mode="after")
    def _resolve(self) -> Settings:
        self.home = self.home.expanduser()
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'dpfl.db'}"
        if not self.broker_url:
            self.broker_url = "filesystem://"
        if not _loopback(self.host) and not self.tokens:
            raise ValueError(
                f"binding to {self.host} exposes the API beyond this machine without authentication; "
                "set DPFL_API_TOKENS (comma-separated bearer tokens) "
                "or bind to 127.0.0.1 (--host / DPFL_HOST)"
            )
        return self

    @property
    def tokens(self) -> frozenset[str]:
        """Returns the accepted bearer tokens (empty: writes are open)."""
        return frozenset(t.strip() for t in self.api_tokens.split(",") if t.strip())

    @property
    def data_dirs(self) -> list[Path]:
        """Returns the folders searched for dataset files."""
        return [Path(p).expanduser() for p in self.data_dir.split(os.pathsep) if p]

    @property
    def cache_dir(self) -> Path:
        """Returns where downloaded and uploaded datasets are kept."""
        return self.home / "datasets"

    @property
    def broker_folder(self) -> Path:
        """Returns the filesystem transport's message folder (embedded mode)."""
        return self.home / "broker"

    def threads_per_run(self, concurrency: int) -> int:
        """Returns the torch threads each of a worker's `concurrency` pool processes should use.

        torch takes every core by default; runs side by side then oversubscribe the cores, and
        OpenMP's spinning threads make that far slower than splitting them (two MNIST runs at
        once on 2 cores: 14.0 s with 2 threads each, 9.0 s with 1).
        """
        if self.torch_threads:
            return self.torch_threads
        return max(1, len(os.sched_getaffinity(0)) // max(1, concurrency))

    @property
    def embedded(self) -> bool:
        """Whether the broker is the embedded filesystem transport."""
        return self.broker_url.startswith("filesystem://")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@functools.lru_cache
def get_settings() -> Settings:
    """Returns the process's settings (cached; tests build their own `Settings`)."""
    return Settings()
