"""The README cannot drift: its algorithms table is the registry, its API paths and bodies are real.

Datasette's `tests/test_docs.py` is the model: the documentation is parsed and checked against
the code it describes, so a renamed route, algorithm or spec field fails here.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend import migrate
from backend.main import create_app
from backend.settings import Settings
from backend.sweeps.schemas import SweepCreate
from dpfl import plugins, runner
from dpfl.algorithms import algorithm_class, registered_algorithms
from dpfl.spec import load_spec, parse_spec
from dpfl.sweep import expand

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text()
API_PATH = re.compile(r"/api/[A-Za-z0-9_.{}$<>,/-]*")
COMMENT = re.compile(r"(^|\s)#\s.*$")


def section(title: str) -> str:
    """Returns the README's text under the level-2 heading `title`, up to the next one."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", TEXT, flags=re.M | re.S)
    assert match, f"README has no section '## {title}'"
    return match.group(1)


def first_table(text: str) -> tuple[list[str], list[list[str]]]:
    """Returns the header and rows of the first markdown table in `text` (`\\|` is a literal bar)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    assert len(cells) >= 2 and set("".join(cells[1])) <= set("-: "), "no markdown table found"
    return cells[0], cells[2:]


def unquote(cell: str) -> str:
    return cell.strip("`")


def algorithm_rows() -> dict[str, dict[str, str]]:
    header, rows = first_table(section("The algorithms"))
    assert header == ["algorithm", "paper", "notion", "what is private"]
    names = [unquote(r[0]) for r in rows]
    assert len(names) == len(set(names)), f"rows repeat: {sorted(n for n in names if names.count(n) > 1)}"
    return {unquote(r[0]): dict(zip(header, r, strict=True)) for r in rows}


def algorithm_drift() -> list[str]:
    """Returns how the README's algorithms table and count differ from the registry, one line each
    (empty: they agree). A new algorithm, one of a plugin too, shows here until its row is written."""
    rows = algorithm_rows()
    registered = set(registered_algorithms())
    problems = [f"no README row for {name!r}" for name in sorted(registered - set(rows))]
    problems += [f"README row {name!r} is no registered algorithm" for name in sorted(set(rows) - registered)]
    problems += [
        f"README says {name!r} is `{unquote(row['notion'])}`; its class says `{algorithm_class(name).notion}`"
        for name, row in rows.items()
        if name in registered and unquote(row["notion"]) != algorithm_class(name).notion
    ]
    stated = re.search(r"(\d+) algorithms", TEXT)
    if stated is None or int(stated.group(1)) != len(registered):  # the first paragraph's count
        count = stated and stated.group(1)
        problems.append(f"README counts {count} algorithms; {len(registered)} are registered")
    return problems


def test_algorithms_table_and_count_are_the_registry():
    assert algorithm_drift() == []


def test_every_row_says_its_paper_and_what_is_private():
    assert all(row["paper"] and row["what is private"] for row in algorithm_rows().values())


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", TEXT, flags=re.M | re.S)


def shell_commands(block: str) -> Iterator[str]:
    """Yields the block's logical lines: backslash continuations and open single quotes joined."""
    pending = ""
    for raw in block.splitlines():
        line = COMMENT.sub("", raw)  # a comment may hold an apostrophe; JSON bodies hold no "# "
        pending = f"{pending}\n{line}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1]
        elif pending.count("'") % 2 == 0:
            yield pending
            pending = ""
    assert not pending, f"unterminated command: {pending!r}"


def curl_calls() -> list[tuple[str, str, str | None]]:
    """Returns (method, path, body) of every curl in the README's sh blocks."""
    calls = []
    for block in code_blocks("sh"):
        for command in shell_commands(block):
            lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            tokens = list(lexer)
            while "curl" in tokens:
                args = tokens[tokens.index("curl") + 1 :]
                end = next((i for i, t in enumerate(args) if t in {"|", ")", ";", "&&"}), len(args))
                args, tokens = args[:end], args[end:]
                method, body, url = "GET", None, None
                for flag, value in zip(args, [*args[1:], ""], strict=True):
                    if flag == "-X":
                        method = value
                    elif flag == "-d":
                        method, body = ("POST" if method == "GET" else method), value
                    elif flag == "-F" and method == "GET":
                        method = "POST"
                    if "/api/" in flag and url is None:
                        url = flag
                assert url is not None, f"a curl without an /api/ URL: {command!r}"
                calls.append((method, url[url.index("/api/") :].split("?")[0], body))
    return calls


@pytest.fixture(scope="module")
def routes(tmp_path_factory) -> dict[str, set[str]]:
    """The API's paths and their methods, from the OpenAPI schema of `create_app` on a test database."""
    home = tmp_path_factory.mktemp("readme")
    url = f"sqlite:///{home / 'dpfl.db'}"
    migrate.upgrade(url)
    app = create_app(Settings(home=home, database_url=url, broker_url="", data_dir=""))
    return {path: {m.upper() for m in ops} for path, ops in app.openapi()["paths"].items()}


def matching(path: str, routes: dict[str, set[str]]) -> set[str]:
    """Returns the methods of the routes whose template matches `path` (a README placeholder such as
    `{id}` or `$RUN` fills a `{param}` segment)."""
    parts = path.rstrip("/").split("/")
    methods: set[str] = set()
    for template, ops in routes.items():
        segments = template.split("/")
        if len(segments) == len(parts) and all(
            t == p or (t.startswith("{") and t.endswith("}")) for t, p in zip(segments, parts, strict=True)
        ):
            methods |= ops
    return methods


def test_every_api_path_in_the_readme_is_a_route(routes):
    paths = {m.rstrip(".,:;") for m in API_PATH.findall(TEXT)}
    assert len(paths) >= 20
    missing = sorted(p for p in paths if not matching(p, routes))
    assert not missing, f"README paths with no route: {missing}"


def test_every_curl_uses_a_method_its_route_has(routes):
    calls = curl_calls()
    assert len(calls) == sum(len(re.findall(r"\bcurl ", b)) for b in code_blocks("sh")) >= 10  # none missed
    wrong = [(method, path) for method, path, _ in calls if method not in matching(path, routes)]
    assert not wrong, f"curl calls with no such route and method: {wrong}"


def test_the_api_section_documents_the_write_guards_401(routes):
    text = " ".join(section("The HTTP API").split())
    assert "gets 401 with `WWW-Authenticate: Bearer`" in text
    guarded = {m for ops in routes.values() for m in ops if m not in {"GET", "HEAD", "OPTIONS"}}
    assert guarded == {"POST", "PUT", "PATCH", "DELETE"} and "every write (POST, PUT, PATCH, DELETE)" in text


def test_curl_bodies_are_valid_specs_and_sweeps():
    checked = set()
    for method, path, body in curl_calls():
        if body is None or method != "POST":
            continue
        if path in {"/api/runs", "/api/privacy/project"}:
            specs = [parse_spec(json.loads(body))]
        elif path == "/api/sweeps":
            sweep = SweepCreate.model_validate_json(body)
            specs = [parse_spec(p.data) for p in expand(sweep.base, sweep.grid, max_points=500)]
            assert len(specs) == 10  # 4 ε × 2 seeds of isrl_mbsgd, fedavg once per seed (the README says so)
        else:
            continue
        for spec in specs:
            algorithm_class(spec.algorithm).parse_params(spec.params)
        checked.add(path)
    assert checked == {"/api/runs", "/api/privacy/project", "/api/sweeps"}


def test_yaml_specs_parse():
    blocks = [b for b in code_blocks("yaml") if "algorithm:" in b]
    assert blocks
    for block in blocks:
        # the checks a submission gets before any data is loaded: algorithm, params, model,
        # dataset classes, users and privacy block (raises naming the field)
        runner.check(load_spec(block))


def _cli_envvars() -> set[str]:
    """Returns the environment variables the `dpfl` command's options read."""
    from typer.main import get_command

    from dpfl.cli import app

    found: set[str] = set()
    commands = [get_command(app)]
    while commands:
        command = commands.pop()
        commands += getattr(command, "commands", {}).values()  # a group's subcommands
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            found |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    return found


def test_every_environment_variable_in_the_readme_is_read():
    settings = {f"DPFL_{name.upper()}" for name in Settings.model_fields}
    named = set(re.findall(r"\bDPFL_[A-Z_]+\b", TEXT))
    assert len(named) >= 8
    unknown = sorted(named - settings - _cli_envvars() - {plugins.ENV_VAR})
    assert not unknown, f"README variables nothing reads: {unknown}"
    header, rows = first_table(section("Scaling out"))
    assert header == ["variable", "meaning"]
    table = {v for r in rows for v in re.findall(r"DPFL_[A-Z_]+", r[0])}
    assert table <= settings and {"DPFL_TORCH_THREADS", "DPFL_DATABASE_URL", "DPFL_BROKER_URL"} <= table
