"""A filter expression over the runs list: `epsilon <= 2 and params.clip = 1 and accuracy > 0.8`.

Clauses `field op value` joined by `and` (every one must hold), as in MLflow's run search:

- a field is a column of the list (numbers: `epsilon`, `accuracy`, `balanced_accuracy`, `loss`,
  `target_epsilon`, `delta`, `rounds`, `seed`; text: `status`, `algorithm`, `dataset`, `notion`, `name`,
  `accountant`) or a dotted path into the run's spec (`params.clip`, `dataset.silos`,
  `privacy.delta`, `model.name`);
- an operator is one of `= != < <= > >=` (`==` is `=`);
- a value is a number, a quoted string, a bare word (`status = succeeded`), `true` or `false`.

A number compares numerically, with spec values that are numbers only (a spec value of another
type never matches, and never stops the query); anything else compares as text. A run without
the field never matches. A spec path reads what the run's spec holds: a param left to its
default is not there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, and_, case
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement

from backend.errors import ParameterError
from backend.models import Run
from dpfl.spec import RunSpec

__all__ = ["COLUMNS", "MAX_FILTER_CHARS", "parse_filter"]

MAX_FILTER_CHARS = 1000

_NUMBERS: dict[str, Any] = {
    "epsilon": Run.epsilon,
    "accuracy": Run.final_accuracy,
    "balanced_accuracy": Run.final_balanced_accuracy,
    "loss": Run.final_loss,
    "target_epsilon": Run.target_epsilon,
    "delta": Run.delta,
    "rounds": Run.rounds,
    "seed": Run.seed,
}
_TEXTS: dict[str, Any] = {
    "status": Run.status,
    "algorithm": Run.algorithm,
    "dataset": Run.dataset,
    "notion": Run.notion,
    "name": Run.name,
    "accountant": Run.accountant,
}
COLUMNS = sorted([*_NUMBERS, *_TEXTS])
"""The list's columns a filter names directly; any other field is a path into the spec."""

_OPERATORS = {
    "=": lambda a, b: a == b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op><=|>=|!=|==|=|<|>)
      | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.]))
      | (?P<word>[A-Za-z_][\w.\-]*)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Clause:
    field: str
    op: str
    value: str | float | bool


def parse_filter(text: str) -> list[ColumnElement[bool]]:
    """Returns the WHERE clauses of a filter expression (none for a blank one).

    Raises:
        ParameterError: 422 naming `filter`, with what was expected where, for text that does
            not parse, a field that is neither a column nor a spec path, or an operator that does
            not fit the value (`<` with text).
    """
    if len(text) > MAX_FILTER_CHARS:
        raise _error(f"must be at most {MAX_FILTER_CHARS} characters; got {len(text)}.")
    return [_where(clause) for clause in _clauses(text)]


def _clauses(text: str) -> list[_Clause]:
    tokens = _tokens(text)
    out, i = [], 0
    while i < len(tokens):
        if out:
            kind, word, at = tokens[i]
            if kind != "word" or word.lower() != "and":
                raise _error(f"expected `and` at character {at + 1}; got {word!r}.")
            i += 1
        field, op, value = (tokens[i + k] if i + k < len(tokens) else None for k in range(3))
        if field is None or field[0] != "word":
            raise _error(f"expected a field at character {_at(field, text)}; got {_shown(field)}.")
        if op is None or op[0] != "op":
            raise _error(f"expected an operator (= != < <= > >=) after {field[1]!r}; got {_shown(op)}.")
        if value is None or value[0] == "op":
            raise _error(f"expected a value after {field[1]} {op[1]}; got {_shown(value)}.")
        out.append(_Clause(_field(field[1]), op[1], _value(value)))
        i += 3
    return out


def _tokens(text: str) -> list[tuple[str, str, int]]:
    tokens, at = [], 0
    while at < len(text):
        if not text[at:].strip():
            break
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            start = len(text) - len(text[at:].lstrip())
            raise _error(f"cannot read {text[start : start + 12]!r} at character {start + 1}.")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind), match.start(kind)))
        at = match.end()
    return tokens


def _field(name: str) -> str:
    if name in COLUMNS:
        return name
    head = name.split(".", 1)[0]
    if "." in name and head in RunSpec.model_fields and all(name.split(".")):
        return name
    raise _error(
        f"names no field: {name!r} is neither a column ({', '.join(COLUMNS)}) nor a path "
        "into the spec such as params.lr or dataset.silos."
    )


def _value(token: tuple[str, str, int]) -> str | float | bool:
    kind, raw, _ = token
    if kind == "number":
        return float(raw)
    if kind == "string":
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw


def _where(clause: _Clause) -> ColumnElement[bool]:
    compare, value = _OPERATORS[clause.op], clause.value
    ordered = clause.op not in ("=", "==", "!=")
    if isinstance(value, str) and ordered:
        raise _error(f"compares {clause.field} {clause.op} with text {value!r}; `<` and `>` take numbers.")
    if clause.field in _NUMBERS:
        if not isinstance(value, float):
            raise _error(f"compares {clause.field}, a number, with {value!r}.")
        return compare(_NUMBERS[clause.field], value)
    if clause.field in _TEXTS:
        if isinstance(value, float | bool):
            raise _error(f"compares {clause.field}, a text, with {value!r}: quote it to compare as text.")
        return compare(_TEXTS[clause.field], value)
    path = tuple(clause.field.split("."))
    node = Run.spec[path]
    if isinstance(value, bool):
        return and_(_JsonType(Run.spec, path) == "boolean", compare(node.as_boolean(), value))
    if isinstance(value, float):
        number = case((_JsonType(Run.spec, path) == "number", node.as_float()), else_=None)
        return compare(number, value)
    return and_(_JsonType(Run.spec, path) == "string", compare(node.as_string(), value))


class _JsonType(FunctionElement):
    """The JSON type of the value at a path of a JSON column: number, string, boolean, or another."""

    type = String()
    inherit_cache = True

    def __init__(self, column, path: tuple[str, ...]):
        self.path = path
        super().__init__(column)


@compiles(_JsonType, "postgresql")
def _json_type_postgresql(element, compiler, **kw) -> str:
    column = compiler.process(next(iter(element.clauses)), **kw)
    path = "{" + ",".join(_quoted(p) for p in element.path) + "}"
    return f"json_typeof({column} #> {compiler.render_literal_value(path, String())})"


@compiles(_JsonType, "sqlite")
def _json_type_sqlite(element, compiler, **kw) -> str:
    column = compiler.process(next(iter(element.clauses)), **kw)
    path = "$" + "".join(f'."{p}"' for p in element.path)
    kind = f"json_type({column}, {compiler.render_literal_value(path, String())})"
    # SQLite says integer or real, true or false; Postgres number and boolean
    return (
        f"(CASE {kind} WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number' "
        f"WHEN 'true' THEN 'boolean' WHEN 'false' THEN 'boolean' ELSE {kind} END)"
    )


def _quoted(part: str) -> str:
    return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _at(token: tuple[str, str, int] | None, text: str) -> int:
    return len(text) + 1 if token is None else token[2] + 1


def _shown(token: tuple[str, str, int] | None) -> str:
    return "the end" if token is None else repr(token[1])


def _error(message: str) -> ParameterError:
    return ParameterError("query", "filter", message)
