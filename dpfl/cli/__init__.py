"""The `dpfl` command line: one `error: …` line and a non-zero exit for a user's mistake.

Tracebacks are shown only with `--debug`. Environment variables and logging are configured
here, never below. Commands of higher layers (the service's `up`, `worker` and `db`) are
plugins: each entry point of the group `dpfl.commands` is a `register(app)` that adds its own,
so this package imports no web code.
"""

from __future__ import annotations

import logging
import sys
from importlib.metadata import entry_points

import typer

try:
    from typer.exceptions import TyperException
except ImportError:  # typer < 0.21 (what flwr 1.42, the flower extra, allows) raises click's own
    from click.exceptions import ClickException as TyperException

from dpfl.cli import privacy
from dpfl.cli import run as run_cmd
from dpfl.cli.audit import audit
from dpfl.cli.reproduce import reproduce
from dpfl.errors import DpflError

__all__ = ["COMMANDS", "app", "main"]

COMMANDS = "dpfl.commands"  # the entry-point group of command plugins

app = typer.Typer(
    name="dpfl",
    help="DP-FL Explorer: private federated learning runs, ε accounting and the dashboard.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(privacy.app, name="privacy")
app.command(name="run")(run_cmd.run)
app.command(name="datasets")(run_cmd.datasets)
app.command(name="algorithms")(run_cmd.algorithms)
app.command(name="demo")(run_cmd.demo)
app.command(name="reproduce")(reproduce)
app.command(name="audit")(audit)
for plugin in entry_points(group=COMMANDS):
    plugin.load()(app)


def main(argv: list[str] | None = None) -> None:
    """Runs the CLI; maps user errors to one `error:` line on stderr (exit 2 for usage, 1 otherwise)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
    # absl (inside dp_accounting) warns per excluded RDP order; those are not the user's business.
    logging.getLogger("absl").setLevel(logging.ERROR)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        app(args=args, prog_name="dpfl", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        sys.exit(130)
    except TyperException as exc:  # usage errors: unknown option, a value of the wrong type, ...
        if debug:
            raise
        print(f"error: {exc.format_message()}", file=sys.stderr)  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except (DpflError, ValueError) as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except OSError as exc:  # the machine's answer (a read-only or full disk, a taken port): one line
        if debug or exc.strerror is None:
            raise
        where = f": {str(exc.filename)!r}" if exc.filename else ""
        print(f"error: {exc.strerror}{where}", file=sys.stderr)
        sys.exit(1)
