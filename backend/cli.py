"""`dpfl up`, `dpfl worker` and `dpfl db …`: the service's processes, as commands of `dpfl`.

`dpfl` imports no web code: it loads its command plugins from the entry-point group
`dpfl.commands` (pyproject.toml), and this module's `register` is the service's. The service's
modules are imported only when these commands run, so `dpfl privacy` and `dpfl run` start
without FastAPI, SQLAlchemy and Celery loaded.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
from typing import Annotated

import typer

from dpfl.errors import DpflError

__all__ = ["db_app", "register", "up", "worker", "worker_command"]

db_app = typer.Typer(help="The database schema (Alembic migrations).", no_args_is_help=True)


def _settings(**flags: object):
    """Returns the service's settings, with the command's flags (e.g. host) applied first.

    A flag is put in the environment (DPFL_<NAME>) before the settings are read, so it passes
    the same checks as the variable, and the workers started beside the API see it too.
    Invalid settings are one line (DpflError), naming what to set.
    """
    # The service modules are imported inside these commands, so `dpfl privacy` and `dpfl run`
    # start without loading FastAPI, SQLAlchemy and Celery.
    from pydantic import ValidationError

    from backend.settings import get_settings

    for name, value in flags.items():
        if value is not None:
            os.environ[f"DPFL_{name.upper()}"] = str(value)
    get_settings.cache_clear()
    try:
        settings = get_settings()
    except ValidationError as exc:
        raise DpflError(_one_line(exc)) from None
    settings.home.mkdir(parents=True, exist_ok=True)
    return settings


def _one_line(exc) -> str:
    err = exc.errors()[0]
    message = err["msg"].removeprefix("Value error, ")
    if err["loc"]:
        name = f"DPFL_{str(err['loc'][0]).upper()}"
        return f"{name}: {message[0].lower()}{message[1:]}; got {err.get('input')!r}"
    return message


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Upgrade the database (DPFL_DATABASE_URL, default SQLite in DPFL_HOME) to a revision."""
    from backend import migrate

    settings = _settings()
    migrate.upgrade(settings.database_url, revision)
    print(f"database at revision {revision}")


@db_app.command("downgrade")
def db_downgrade(revision: Annotated[str, typer.Argument(help="target revision, e.g. base")]) -> None:
    """Downgrade the database to a revision."""
    from backend import migrate

    migrate.downgrade(_settings().database_url, revision)
    print(f"database at revision {revision}")


def worker_command(concurrency: int) -> list[str]:
    """Returns the command line of one Celery worker process (also used by the service tests)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "worker.app",
        "worker",
        "--loglevel=INFO",
        f"--concurrency={concurrency}",
        "--without-gossip",
        "--without-mingle",
    ]


def worker(concurrency: Annotated[int, typer.Option(help="runs at once in this worker")] = 1) -> None:
    """Start a Celery worker for the configured broker and database."""
    _settings()
    os.execv(sys.executable, worker_command(concurrency))


def up(
    host: Annotated[str | None, typer.Option(help="bind address (default DPFL_HOST, 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default DPFL_PORT, 8000)")] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=0, help="worker processes to start beside the API (default: one per two cores, at least one)"
        ),
    ] = None,
    demo: Annotated[
        bool, typer.Option(help="queue a small demo sweep on first start (no sweep yet)")
    ] = False,
) -> None:
    """Start DP-FL Explorer: upgrade the database, start a worker and serve the API."""
    # Settings first: a refused bind is one line before the web stack is imported (2–3 s).
    settings = _settings(host=host, port=port)
    import uvicorn

    from backend import lifeline, migrate
    from backend.main import create_app

    migrate.upgrade(settings.database_url)
    if demo:
        from backend.demo import seed_demo

        if (sweep_id := seed_demo(settings)) is not None:
            print(f"queued the demo sweep {sweep_id}; open Compare to watch its curves appear")
    # uvicorn re-raises the SIGTERM it caught after shutting down; make that an exception, not
    # an abrupt exit, so the workers below are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # One slow run (a calibration, a Paillier round) must not hold the whole queue where there are
    # cores to spare; the workers share the cores, unless DPFL_TORCH_THREADS says otherwise.
    workers = max(1, len(os.sched_getaffinity(0)) // 2) if workers is None else workers
    env = os.environ | {"DPFL_TORCH_THREADS": str(settings.threads_per_run(workers))}
    # Each worker in its own process group, so that stopping it also stops its pool children.
    # SIGQUIT, Celery's cold shutdown, should `dpfl up` be killed outright: it ends the pool too.
    procs = [
        subprocess.Popen(
            worker_command(1),
            env=env,
            start_new_session=True,
            preexec_fn=functools.partial(lifeline.signal_when_orphaned, signal.SIGQUIT),
        )
        for _ in range(workers)
    ]
    try:
        bind_host, bind_port = settings.host, settings.port
        url = f"http://{bind_host}:{bind_port}"
        print(f"DP-FL Explorer on {url}  (API docs at {url}/docs; database {settings.database_url})")
        uvicorn.run(
            create_app(settings),
            host=bind_host,
            port=bind_port,
            log_level="warning",
            timeout_graceful_shutdown=5,  # a request still running then is cancelled
        )
    finally:
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def register(app: typer.Typer) -> None:
    """Adds `dpfl up`, `dpfl worker` and `dpfl db` to the `dpfl` command line."""
    app.command(name="up")(up)
    app.command(name="worker")(worker)
    app.add_typer(db_app, name="db")
