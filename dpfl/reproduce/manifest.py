"""Which configs reproduce a paper, and the `reproduce:` block that turns a config into a sweep.

A file ``configs/paper/<paper>_<setting>.yaml`` is a RunSpec (``dpfl run`` runs it as the paper's
base setting; `dpfl.spec.load_spec` ignores the block) plus an optional top-level block::

    reproduce:
      title: "MNIST, 25 silos: test error against ε"
      grid: {algorithm: [isrl_mbsgd, isrl_spider], privacy.epsilon: [0.75, 3, 18]}
      params_by_algorithm: {isrl_mbsgd: {lr: 2.0, batch_size: 128, clip: 1.0}}
      seeds: 3                      # runs per grid cell (seeds base.seed, base.seed + 1, ...)
      x: privacy.epsilon            # the grid key on the figure's x axis
      quick: {set: {rounds: 10}, grid: {privacy.epsilon: [1, 18]}, seeds: 1}
                                    # or quick: {skip: "why"}: only the full sweep runs it
      paper:                        # the paper's reported numbers, next to ours in the report
        - {algorithm: isrl_spider, x: 3, metric: test_error, value: 0.12, source: "Table 2"}
      claims:                       # checked on the mean over the sweep's x values
        - {text: "...", better: isrl_spider, than: isrl_mbsgd, metric: test_error, by: 0.0172}
        - {text: "...", better: uldp_avg_w, than: uldp_avg, metric: loss, round: 10}  # at round 10
      tune:                         # a method whose setting the paper picks by training loss
        gdp_gd: [{label: "α = 0.3", set: {params.lr: 0.3}}, {label: "α = 1", set: {params.lr: 1.0}}]
      sensitivity:                  # a choice the paper does not state: the verdict under each
        ae_dpfl: [{label: "Q = 100", set: {params.queries: 100}}]
      ceiling:                      # the methods once more with (almost) no noise
        set: {privacy.noise_multiplier: 1.0e-3, privacy.epsilon: null}
      notes: "free text shown under the setting's title"

Parameters: the config's own `params` belong to its own `algorithm`; every other algorithm of
the grid takes exactly its `params_by_algorithm` entry (or its defaults), so parameters one
method does not know (SPIDER's `phase`) never reach another. The grid is the API's
(`dpfl.sweep.expand`), with `seed` added from `seeds`; grid keys besides `algorithm`, `x` and
`seed` split the results into variants, each with its own figure and verdicts.

Tuning: a method listed under `tune` runs once per candidate (each sets `algorithm`, `params`,
`params.<name>` or `rounds` over the method's point), and in every cell (variant, x) the candidate with the
lowest mean final training loss over the seeds stands for the method, as the papers pick step
sizes and variants. Training loss is a diagnostic of private data: the choice is not accounted
in the ledger (nor is it in the papers), and the report says so next to the chosen candidates.

Sensitivity: a method listed under `sensitivity` also runs once per candidate (which may set
`privacy.calibration` too); its configured point still stands for it, and the report gives each
claim's verdict with each candidate standing in instead, so a reader sees whether a choice the
paper leaves unstated moves the verdict.

Ceiling: with a `ceiling` block every method (or those it lists) runs once more per variant and
seed with its fields set, off the x axis: the no-noise ceiling, shown beside the method's results
and never in a verdict, so a reader sees what the privacy costs and what the method reaches at best.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import ValidationError

import dpfl
from dpfl.errors import DpflError, SpecError, UnknownNameError
from dpfl.papers import PAPERS, PaperInfo
from dpfl.reproduce.block import Candidate, Ceiling, Claim, PaperValue, ReproduceBlock, Variation
from dpfl.spec import check_privacy, parse_spec, spec_error, yaml_load
from dpfl.sweep import PER_ALGORITHM, Point, PointError, expand, locate

__all__ = [
    "CEILING",
    "PAPERS",
    "SENSITIVITY",
    "Candidate",
    "Ceiling",
    "Cell",
    "Claim",
    "ConfigError",
    "PaperInfo",
    "PaperValue",
    "ReproduceBlock",
    "Setting",
    "Sweep",
    "Variation",
    "chosen_settings",
    "default_config_dir",
    "load_paper",
    "load_setting",
]

BLOCK = "reproduce"
MAX_POINTS = 5_000  # a reproduction is bounded by patience, not by a server's limit
CEILING, SENSITIVITY = "ceiling", "sensitivity"  # the roles of runs that stand for no method's cell


class ConfigError(SpecError):
    """A config file's field is invalid; the message starts with the file's name."""

    def __init__(self, file: str, field: str, message: str):
        super().__init__(field, message)
        self.file = file
        self.args = (f"{file}: `{field}` {message}",)


class Cell(NamedTuple):
    """Where a run of a reproduction sits: method, x, variant, seed, the tuning or sensitivity
    candidate it runs ("" for none) and its role: "" for a run of the method's cell, `ceiling` or
    `sensitivity` for the runs beside it."""

    algorithm: str
    x: float | None
    variant: tuple[tuple[str, Any], ...]
    seed: int
    candidate: str = ""
    role: str = ""


@dataclass(frozen=True)
class Sweep:
    """One setting's sweep as run: its base (with `params_by_algorithm`), grid and validated points."""

    setting: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    x: str
    points: list[Point]
    tune: Mapping[str, Sequence[Candidate]] = dataclasses.field(default_factory=dict)
    sensitivity: Mapping[str, Sequence[Candidate]] = dataclasses.field(default_factory=dict)
    ceiling: Ceiling | None = None

    @property
    def variant_keys(self) -> list[str]:
        """Returns the grid keys that split results into variants (not algorithm, x or seed)."""
        return [k for k in self.grid if k not in ("algorithm", "seed", self.x)]

    def cell(self, spec: Mapping[str, Any]) -> Cell:
        """Returns where a run sits, from its spec as JSON: its method (the tuned method a
        candidate stands for), x, variant, seed and candidate label.

        x is None for a run without that field (a non-private run when x is `privacy.epsilon`).
        """
        x = _get(spec, self.x)
        variant = tuple((key, _get(spec, key)) for key in self.variant_keys)
        method, candidate, role = self._method(spec)
        seed = int(spec.get("seed", 0))
        if role == CEILING:  # beside every x, whatever its own (a σ sweep's ceiling sets σ)
            x = None
        return Cell(method, None if x is None else float(x), variant, seed, candidate, role)

    def _method(self, spec: Mapping[str, Any]) -> tuple[str, str, str]:
        """Returns (method, candidate label, role) of a run: a ceiling run by the ceiling's fields,
        else the first candidate whose fields it has, else the method's own run."""
        if self.ceiling is not None and _has(spec, self.ceiling.set):
            return str(spec["algorithm"]), "", CEILING
        for role, table in (("", self.tune), (SENSITIVITY, self.sensitivity)):
            for method, candidates in table.items():
                for candidate in candidates:
                    wanted = candidate.set.get("algorithm", method)
                    rest = {k: v for k, v in candidate.set.items() if k != "algorithm"}
                    if spec["algorithm"] == wanted and _has(spec, rest):
                        return method, candidate.label, role
        return str(spec["algorithm"]), "", ""

    @property
    def ceiling_methods(self) -> list[str]:
        """Returns the methods the ceiling runs (none without a ceiling; `Setting.sweep` lists them)."""
        return [] if self.ceiling is None else list(self.ceiling.methods)

    def ceiling_grid(self) -> dict[str, list[Any]]:
        """Returns the ceiling's grid: the sweep's without its x, over the ceiling's methods."""
        return {k: v for k, v in self.grid.items() if k != self.x} | {"algorithm": self.ceiling_methods}

    def submissions(self) -> list[tuple[dict[str, Any], dict[str, list[Any]]]]:
        """Returns the (base, grid) sweeps a server runs for this one: the untuned methods' grid,
        then one sweep per candidate of a tuned method (a server's grid sets no per-method fields)."""
        untuned = [a for a in self.grid.get("algorithm", []) if a not in self.tune]
        out = [(self.base, self.grid | {"algorithm": untuned})] if untuned else []
        if self.ceiling is not None:
            out.append((_with(self.base, self.ceiling.set), self.ceiling_grid()))
        for method, candidates in (*self.tune.items(), *self.sensitivity.items()):
            for candidate in candidates:
                data = _with(_method_point(self.base, method), _own(candidate.set))
                algorithm = data["algorithm"]
                # the fields beside the method's (rounds) go into the candidate's base
                rest = {k: v for k, v in candidate.set.items() if k.split(".")[0] not in data}
                base = _with(self.base, rest) | {PER_ALGORITHM: {algorithm: data.get("params") or {}}}
                out.append((base, self.grid | {"algorithm": [algorithm]}))
        return out


@dataclass(frozen=True)
class Setting:
    """One config file of a paper with its `reproduce:` block."""

    name: str  # the file's stem, e.g. isrl_mnist
    path: Path
    spec: dict[str, Any]  # the RunSpec part, as written
    block: ReproduceBlock

    @property
    def algorithms(self) -> list[str]:
        """Returns the algorithms of the full sweep (the grid's, or the config's own)."""
        return [str(a) for a in self.block.grid.get("algorithm", [self.spec.get("algorithm")])]

    def sweep(self, *, quick: bool = False, seeds: int | None = None) -> Sweep:
        """Returns the sweep to run, every point validated (`--quick` and `--seeds` applied).

        Raises:
            ConfigError: `quick` was asked for but not given, or a point is invalid (the field
                named where it is written: the base spec, `reproduce.grid.<key>`, ...).
        """
        block = self.block
        fields: dict[str, str] = {}  # grid key → where it is written, when not `reproduce.grid`
        data, grid = dict(self.spec), dict(block.grid)
        count = block.seeds
        if quick:
            if block.quick is None:
                raise ConfigError(self.path.name, "reproduce.quick", "is not given; run without --quick.")
            data = self._quick_set(data, block.quick.set)
            grid |= block.quick.grid
            fields |= {key: "reproduce.quick.grid" for key in block.quick.grid}
            count = block.quick.seeds or count
        count = seeds or count
        start = int(data.get("seed", 0))
        grid["seed"] = list(range(start, start + count))
        own = {str(data.get("algorithm")): data.pop("params", None) or {}}
        base = data | {PER_ALGORITHM: own | block.params_by_algorithm}
        try:
            points = expand(base, grid, max_points=MAX_POINTS)
            for i in range(len(points)):
                _validate(i, points, base)
        except PointError as exc:
            raise ConfigError(self.path.name, self._field(exc.loc, fields), exc.reason) from None
        ceiling = self._private_ceiling(points)
        sweep = Sweep(self.name, base, grid, block.x, [], dict(block.tune), dict(block.sensitivity), ceiling)
        return dataclasses.replace(sweep, points=self._candidates(points) + self._ceiling(sweep))

    def _private_ceiling(self, points: Sequence[Point]) -> Ceiling | None:
        """Returns the ceiling with its methods listed: those named, or every method of the grid,
        leaving out a non-private one (its runs add no noise: its own results are its ceiling)."""
        ceiling = self.block.ceiling
        if ceiling is None:
            return None
        private = {p.algorithm for p in points if p.data.get("privacy")}
        for i, method in enumerate(ceiling.methods):
            if method not in private:
                raise ConfigError(
                    self.path.name,
                    f"{BLOCK}.ceiling.methods.{i}",
                    f"names {method!r}, which adds no noise: its own results are its ceiling.",
                )
        named = ceiling.methods or self.algorithms
        return ceiling.model_copy(update={"methods": [m for m in named if m in private]})

    def _candidates(self, points: Sequence[Point]) -> list[Point]:
        """Returns the points with each point of a tuned method replaced by one per candidate, and
        each point of a method under `sensitivity` followed by one per candidate."""
        out = []
        for point in points:
            tuned = self.block.tune.get(point.algorithm)
            if tuned is None:
                out.append(point)
            for table in ("tune", "sensitivity"):
                for i, candidate in enumerate(getattr(self.block, table).get(point.algorithm, [])):
                    varied = Point(point.overrides, _with(point.data, candidate.set))
                    self._check(varied.data, f"{BLOCK}.{table}.{point.algorithm}.{i}.set")
                    out.append(varied)
        return out

    def _ceiling(self, sweep: Sweep) -> list[Point]:
        """Returns the ceiling's points: each method of it once per variant and seed, without noise."""
        if sweep.ceiling is None:
            return []
        grid = sweep.ceiling_grid() | {"seed": sweep.grid["seed"]}
        points = expand(_with(sweep.base, sweep.ceiling.set), grid, max_points=MAX_POINTS)
        for point in points:
            self._check(point.data, f"{BLOCK}.ceiling.set")
        return points

    def _check(self, data: Mapping[str, Any], where: str) -> None:
        """Refuses a candidate's or the ceiling's spec, naming the field under `where`."""
        try:
            _check_spec(data)
        except SpecError as exc:
            raise ConfigError(self.path.name, f"{where}.{exc.field}", exc.reason) from None
        except UnknownNameError as exc:
            raise ConfigError(self.path.name, f"{where}.{exc.field}", f"names {exc}.") from None

    def _quick_set(self, data: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
        """Returns a copy of `data` with each dotted key of `quick.set` set to its value."""
        try:
            return _with(data, values)
        except _NotMapping as exc:
            raise ConfigError(self.path.name, f"{BLOCK}.quick.set.{exc.key}", exc.reason) from None

    def _field(self, loc: Sequence[str], fields: Mapping[str, str]) -> str:
        """Returns where in the file a sweep field is written."""
        if loc[0] == "grid":
            key = loc[1] if len(loc) > 1 else ""
            return ".".join(p for p in (fields.get(key, "reproduce.grid"), key) if p)
        rest = list(loc[1:])
        if (
            rest[:2] == [PER_ALGORITHM, self.spec.get("algorithm")]
            and rest[1] not in self.block.params_by_algorithm
        ):
            return ".".join(["params", *rest[2:]])  # the config's own params
        if rest[:1] == [PER_ALGORITHM]:
            return ".".join(["reproduce", *rest])
        return ".".join(rest) or "spec"


def _validate(index: int, points: Sequence[Point], base: Mapping[str, Any]) -> None:
    """Refuses a point whose spec or params are invalid, naming the field it came from."""
    point = points[index]
    try:
        _check_spec(point.data)
    except SpecError as exc:
        where = ", ".join(f"{k}={json.dumps(v)}" for k, v in point.overrides.items())
        raise PointError(
            locate(exc.field, point, base), f"{exc.reason.rstrip('.')} (point {where})."
        ) from None
    except UnknownNameError as exc:
        raise PointError(("base", "spec"), str(exc)) from None


def _check_spec(data: Mapping[str, Any]) -> None:
    """Raises SpecError naming the field (or UnknownNameError) unless `data` is a spec its
    algorithm takes, params and privacy block included."""
    from dpfl.algorithms import algorithm_class  # here: naming the papers (`dpfl --help`) needs no torch

    spec = parse_spec(data)
    cls = algorithm_class(spec.algorithm)
    check_privacy(spec, cls.notion_of(cls.parse_params(spec.params)))


class _NotMapping(Exception):
    def __init__(self, key: str, part: str):
        super().__init__(key)
        self.key, self.reason = key, f"cannot be set: {part!r} is not a mapping."


def _with(data: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Returns a deep copy of `data` with each dotted key of `values` set (parents created)."""
    out = copy.deepcopy(dict(data))
    for key, value in values.items():
        node, (*parents, leaf) = out, key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise _NotMapping(key, part)
        node[leaf] = copy.deepcopy(value)
    return out


def _own(values: Mapping[str, Any]) -> dict[str, Any]:
    """Returns the method's own fields of a candidate: `algorithm` and `params`, dotted or not."""
    return {k: v for k, v in values.items() if k.split(".")[0] in ("algorithm", "params")}


def _method_point(base: Mapping[str, Any], method: str) -> dict[str, Any]:
    """Returns `method`'s spec fields over the base: its algorithm and its per-method params."""
    params = (base.get(PER_ALGORITHM) or {}).get(method) or {}
    return {"algorithm": method, "params": copy.deepcopy(params)}


def _has(spec: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Returns whether `spec` has every dotted field of `values` (None: absent or null)."""
    return all(_get(spec, key) == value for key, value in values.items())


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    """Returns the value at a dotted path of a nested mapping, None where the path ends early."""
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def default_config_dir() -> Path:
    """Returns the repository's configs/paper folder, found relative to the installed package."""
    return Path(dpfl.__file__).resolve().parents[1] / "configs" / "paper"


def load_setting(path: Path) -> Setting | None:
    """Returns the config at `path` as a Setting, or None when it has no `reproduce:` block.

    Raises:
        ConfigError: the file is not valid YAML, its spec is invalid or its block is.
    """
    try:
        raw = yaml_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(path.name, "spec", f"is not valid YAML: {exc}".replace("\n", " ")) from None
    if not isinstance(raw, dict):
        raise ConfigError(path.name, "spec", f"must be a mapping of fields; got {type(raw).__name__}.")
    if BLOCK not in raw:
        return None
    spec = {k: v for k, v in raw.items() if k != BLOCK}
    try:
        parse_spec(spec)
        block = ReproduceBlock.model_validate(raw[BLOCK])
    except SpecError as exc:
        raise ConfigError(path.name, exc.field, exc.reason) from None
    except ValidationError as exc:
        err = spec_error(exc, prefix=BLOCK)
        raise ConfigError(path.name, err.field, err.reason) from None
    setting = Setting(path.stem, path, spec, block)
    _check_block(setting)
    return setting


def _check_block(setting: Setting) -> None:
    """Refuses what pydantic cannot see: seeds in the grid, an x off the grid, unknown method names."""
    block, file = setting.block, setting.path.name
    for key in (*block.grid, *(block.quick.grid if block.quick else ())):
        if key == "seed":
            raise ConfigError(
                file, f"{BLOCK}.grid.seed", "cannot be swept; give the count as `reproduce.seeds`."
            )
    if block.x not in block.grid:
        raise ConfigError(
            file,
            f"{BLOCK}.x",
            f"must be a key of `reproduce.grid` ({', '.join(block.grid)}); got {block.x!r}.",
        )
    quick_x = block.quick.grid.get(block.x, []) if block.quick else []
    for value in (*block.grid[block.x], *quick_x):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(
                file, f"{BLOCK}.grid.{block.x}", f"must list numbers (the x axis); got {value!r}."
            )
    known = setting.algorithms
    seen: set[str] = set()
    for i, entry in enumerate(block.paper):
        _known_algorithm(file, f"{BLOCK}.paper.{i}.algorithm", entry.algorithm, known)
        key = json.dumps([entry.algorithm, entry.x, entry.where], sort_keys=True)
        if key in seen:
            raise ConfigError(
                file, f"{BLOCK}.paper.{i}", "repeats the cell of an earlier entry; give one value a cell."
            )
        seen.add(key)
    for i, claim in enumerate(block.claims):
        _known_algorithm(file, f"{BLOCK}.claims.{i}.better", claim.better, known)
        _known_algorithm(file, f"{BLOCK}.claims.{i}.than", claim.than, known)
    swept = {*block.grid, *(block.quick.grid if block.quick else ()), "seed"}
    for table in ("tune", "sensitivity"):
        for method, candidates in getattr(block, table).items():
            _known_algorithm(file, f"{BLOCK}.{table}.{method}", method, known)
            for i, candidate in enumerate(candidates):
                for key in candidate.set.keys() & (swept - {"algorithm"}):
                    raise ConfigError(
                        file,
                        f"{BLOCK}.{table}.{method}.{i}.set.{key}",
                        "must not set a key the grid sweeps: every point of the grid sets it again.",
                    )
                other = candidate.set.get("algorithm", method)
                if other != method and other in known:
                    raise ConfigError(
                        file,
                        f"{BLOCK}.{table}.{method}.{i}.set.algorithm",
                        f"must not be a method of the grid ({other!r} is): its runs would count twice.",
                    )
    for method in block.sensitivity:
        if method in block.tune:
            raise ConfigError(
                file, f"{BLOCK}.sensitivity.{method}", "must not be tuned too: its own point would not stand."
            )
    if block.ceiling is not None:
        for i, method in enumerate(block.ceiling.methods):
            _known_algorithm(file, f"{BLOCK}.ceiling.methods.{i}", method, known)
        if block.x not in block.ceiling.set:
            raise ConfigError(
                file,
                f"{BLOCK}.ceiling.set",
                f"must set the x field `{block.x}` (to null, or the value that removes the noise): a ceiling "
                "run stands beside every x.",
            )


def _known_algorithm(file: str, field: str, name: str, known: Sequence[str]) -> None:
    if name not in known:
        raise ConfigError(
            file, field, f"must be one of the sweep's algorithms ({', '.join(known)}); got {name!r}."
        )


def quick_settings(settings: Sequence[Setting]) -> tuple[list[Setting], dict[str, str]]:
    """Returns the settings `--quick` runs, and those it leaves out (`reproduce.quick.skip`) with why.

    Raises:
        SpecError: every setting is left out.
    """
    left_out = {
        s.name: s.block.quick.skip for s in settings if s.block.quick is not None and s.block.quick.skip
    }
    kept = [s for s in settings if s.name not in left_out]
    if settings and not kept:
        raise SpecError("--quick", "leaves out every config of this paper; run without --quick.")
    return kept, left_out


def chosen_settings(settings: Sequence[Setting], names: Sequence[str] | None) -> list[Setting]:
    """Returns the settings `--setting` names (each as its config's name, with or without the paper's
    prefix: `cifar10` or `isrl_cifar10`), in the paper's order; all of them for none.

    Raises:
        SpecError: a name is not a setting of the paper (naming `--setting` and the settings).
    """
    if not names:
        return list(settings)
    short = {s.name.split("_", 1)[-1]: s.name for s in settings}
    unknown = [n for n in names if short.get(n, n) not in short.values()]
    if unknown:
        raise SpecError(
            "--setting",
            f"must name settings of the paper ({', '.join(short)}); got {', '.join(map(repr, unknown))}.",
        )
    wanted = {short.get(n, n) for n in names}
    return [s for s in settings if s.name in wanted]


def load_paper(paper: str, config_dir: Path) -> list[Setting]:
    """Returns the settings of `paper`: every `<paper>.yaml` or `<paper>_*.yaml` with a block, by name.

    Raises:
        SpecError: `paper` is unknown or the folder is missing.
        ConfigError: a config is invalid.
        DpflError: no config of the paper has a block.
    """
    if paper not in PAPERS:
        known = ", ".join(f"{p.key} (seed {p.seed})" for p in PAPERS.values())
        raise SpecError("PAPER", f"must be one of {known}; got {paper!r}.")
    if not config_dir.is_dir():
        raise SpecError("--configs", f"must be a folder of paper configs; got {str(config_dir)!r}.")
    files = sorted({*config_dir.glob(f"{paper}.yaml"), *config_dir.glob(f"{paper}_*.yaml")})
    settings = [s for s in (load_setting(f) for f in files) if s is not None]
    if not settings:
        found = ", ".join(f.name for f in files) or "none"
        raise DpflError(
            f"no config of paper {paper!r} in {config_dir} has a `reproduce:` block yet "
            f"(its configs: {found}); add one as configs/paper/isrl_mnist.yaml does"
        )
    return settings
