"""`dpfl` is the science and imports no web code: no backend, worker, FastAPI, SQLAlchemy or Celery.

The service's commands (`dpfl up`, `dpfl worker`, `dpfl db`) reach the command line as a plugin
(the entry-point group `dpfl.commands`), not by an import from `dpfl`.
"""

import ast
from importlib.metadata import entry_points
from pathlib import Path

from dpfl.cli import COMMANDS, app

DPFL = Path(__file__).resolve().parents[2] / "dpfl"
WEB = {"backend", "worker", "fastapi", "sqlalchemy", "celery", "alembic", "uvicorn", "starlette"}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_no_module_of_dpfl_imports_web_code():
    offenders = {
        str(path.relative_to(DPFL.parent)): sorted(_imports(path) & WEB)
        for path in sorted(DPFL.rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_service_commands_come_from_the_plugin():
    [plugin] = [p for p in entry_points(group=COMMANDS) if p.name == "service"]
    assert plugin.value == "backend.cli:register"
    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert {"up", "worker", "db", "run", "privacy", "reproduce"} <= names
