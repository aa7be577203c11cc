"""Which runs a list or an export shows: filters, text search, sort keys, and the rows.

GET /api/runs (one page) and GET /api/runs.csv (every match, streamed) share `RunQuery`, so a
CSV holds exactly the rows the table would page through.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Float, String, cast, func, or_, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session, defer, undefer
from sqlalchemy.sql.expression import ColumnElement, FunctionElement

from backend.errors import ParameterError
from backend.models import Run
from backend.runs.filters import parse_filter

__all__ = [
    "SORTS",
    "Archived",
    "RunQuery",
    "archived_filter",
    "count_runs",
    "list_runs",
    "stream_runs",
    "tag_clause",
    "text_clause",
]


class Archived(enum.StrEnum):
    """Which items a list shows: not archived (the default), only archived, or all."""

    false = "false"
    true = "true"
    all = "all"


class _SecondsRun(FunctionElement):
    """Seconds from `started_at` to `finished_at` (or to now while running); NULL before it starts."""

    type = Float()
    inherit_cache = True


@compiles(_SecondsRun, "postgresql")
def _seconds_postgresql(element, compiler, **kw) -> str:
    return "EXTRACT(EPOCH FROM (COALESCE(runs.finished_at, now()) - runs.started_at))"


@compiles(_SecondsRun, "sqlite")
def _seconds_sqlite(element, compiler, **kw) -> str:
    # SQLite keeps UTC timestamps as text; julianday reads them, and 'now' is UTC too
    return "((julianday(COALESCE(runs.finished_at, 'now')) - julianday(runs.started_at)) * 86400.0)"


SORTS: dict[str, ColumnElement[Any]] = {
    "created_at": Run.created_at,
    "epsilon": Run.epsilon,
    "final_accuracy": Run.final_accuracy,
    "final_loss": Run.final_loss,
    "best_accuracy": Run.best_accuracy,
    "final_balanced_accuracy": Run.final_balanced_accuracy,
    "target_epsilon": Run.target_epsilon,
    "algorithm": Run.algorithm,
    "status": Run.status,
    "dataset": Run.dataset,
    "name": Run.name,
    "notion": Run.notion,
    "rounds": Run.rounds,
    "duration_s": _SecondsRun(),
    "delta": Run.delta,
    "accountant": Run.accountant,
}


def archived_filter(column: ColumnElement[bool], archived: Archived) -> list[ColumnElement[bool]]:
    """Returns the WHERE clauses that keep the rows `archived` asks for."""
    if archived is Archived.all:
        return []
    return [column.is_(archived is Archived.true)]


def _tags_text(column: ColumnElement[Any]) -> ColumnElement[str]:
    # Tags are stored as JSON text (json.dumps): a tag is found as its JSON string, quotes included.
    return func.lower(cast(column, String))


def tag_clause(column: ColumnElement[Any], tag: str) -> ColumnElement[bool]:
    """Returns a clause that holds when the JSON list `column` contains exactly `tag`."""
    return cast(column, String).contains(json.dumps(tag.strip()), autoescape=True)


def text_clause(q: str, *columns: ColumnElement[Any], tags: ColumnElement[Any]) -> ColumnElement[bool]:
    """Returns a clause: `q` is in one of `columns` or in one of the tags, whatever the case.

    The exact text always matches. Case is ignored in ASCII letters everywhere, and beyond
    ASCII where the database lowers them (Postgres does, SQLite does not); in tags, which are
    stored as JSON with non-ASCII letters escaped, in ASCII letters only.
    """
    text = q.strip()
    return or_(
        *(func.lower(c).contains(text.lower(), autoescape=True) for c in columns),
        *(c.contains(text, autoescape=True) for c in columns),
        _tags_text(tags).contains(json.dumps(text)[1:-1].lower(), autoescape=True),
    )


@dataclass
class RunQuery:
    """The filters and order of a runs list; every filter given must hold."""

    status: str | None = None
    algorithm: str | None = None
    dataset: str | None = None
    sweep_id: str | None = None
    q: str | None = None
    tags: list[str] = field(default_factory=list)
    archived: Archived = Archived.false
    sort: str = "-created_at"
    filter: str | None = None  # an expression (`backend.runs.filters`)

    def where(self) -> list[ColumnElement[bool]]:
        """Returns the WHERE clauses of the filters."""
        clauses: list[ColumnElement[bool]] = [
            column == value
            for column, value in (
                (Run.status, self.status),
                (Run.algorithm, self.algorithm),
                (Run.dataset, self.dataset),
                (Run.sweep_id, self.sweep_id),
            )
            if value is not None
        ]
        if self.q and self.q.strip():
            clauses.append(
                or_(
                    text_clause(self.q, Run.name, Run.algorithm, Run.dataset, tags=Run.tags),
                    Run.id.startswith(self.q.strip().lower(), autoescape=True),
                )
            )
        clauses += [tag_clause(Run.tags, tag) for tag in self.tags]
        clauses += parse_filter(self.filter or "")
        return clauses + archived_filter(Run.archived, self.archived)

    def order(self) -> list[ColumnElement[Any]]:
        """Returns the ORDER BY: the sort key (rows without a value last), then the newest id first.

        Raises:
            ParameterError: `sort` is not a known key (422 naming `sort` and the keys).
        """
        key = self.sort.removeprefix("-")
        if key not in SORTS:
            raise ParameterError(
                "query",
                "sort",
                f"must be one of {', '.join(sorted(SORTS))} (prefix - for descending); got {self.sort!r}.",
            )
        column = SORTS[key]
        direction = column.desc() if self.sort.startswith("-") else column.asc()
        return [direction.nulls_last(), Run.id.desc()]


def _select(query: RunQuery):
    # Without `spec`, `diagnostics` and `timings`: JSON that no list shows and that made up most
    # of the time to load a page (benchmarks/api.py); the spec's seed and params come alone.
    return (
        select(Run)
        .where(*query.where())
        .options(
            defer(Run.spec),
            defer(Run.diagnostics),
            defer(Run.timings),
            undefer(Run.seed),
            undefer(Run.params),
            undefer(Run.sweep_name),
        )
        .order_by(*query.order())
    )


def count_runs(session: Session, query: RunQuery) -> int:
    """Returns how many runs match the filters."""
    return session.scalar(select(func.count()).select_from(Run).where(*query.where())) or 0


def list_runs(
    session: Session, query: RunQuery, *, limit: int = 50, offset: int = 0
) -> tuple[list[Run], int]:
    """Returns one page of runs matching the filters, and how many match in all."""
    stmt = _select(query)  # first: a bad sort is refused before any query runs
    total = count_runs(session, query)
    return list(session.scalars(stmt.limit(limit).offset(offset)).all()), total


def param_keys(session: Session, query: RunQuery) -> list[str]:
    """Returns the params keys of every run matching the filters, sorted: the CSV's `params.*` columns."""
    keys: set[str] = set()
    for params in session.scalars(select(Run.params).where(*query.where()).execution_options(yield_per=500)):
        if isinstance(params, dict):
            keys.update(params)
    return sorted(keys)


def stream_runs(session: Session, query: RunQuery, *, batch: int = 500) -> Iterator[Run]:
    """Yields every run matching the filters, in order, `batch` rows at a time from one snapshot."""
    yield from session.scalars(_select(query).execution_options(yield_per=batch))
