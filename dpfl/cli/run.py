"""`dpfl run SPEC` and `dpfl datasets`.

The runner (torch and every algorithm) is imported by the commands, not here, so that
`dpfl --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, track
from rich.table import Table

from dpfl.cli.settings import DEVICE_HELP, cache_dir, data_dirs
from dpfl.errors import DatasetUnavailable, DpflError, SpecError
from dpfl.formats import number_text

if TYPE_CHECKING:
    from dpfl import runner
    from dpfl.spec import RunSpec

__all__ = ["datasets", "demo", "run"]


def _read_spec(path: Path, overrides: list[str]) -> RunSpec:
    from dpfl.spec import load_spec

    if not path.is_file():
        raise SpecError("SPEC", f"file {str(path)!r} does not exist.")
    return load_spec(path.read_text(), overrides=overrides)


def run(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Run spec, YAML or JSON.")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a field: rounds=5, privacy.epsilon=1.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the result as JSON here.")] = None,
    download: Annotated[
        bool, typer.Option("--download", help="Fetch a missing dataset (checksummed).")
    ] = False,
    device: Annotated[str | None, typer.Option("--device", help=DEVICE_HELP)] = None,
) -> None:
    """Run one federated experiment with a progress bar; print a summary, write JSON with --out."""
    from dpfl import runner
    from dpfl.data import dataset_info
    from dpfl.device import resolve_device

    spec = _read_spec(spec_path, set_ or [])
    where = resolve_device(device, field="--device")
    console = Console(stderr=True)
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("acc {task.fields[acc]}  ε {task.fields[eps]}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(spec.algorithm, total=spec.rounds, acc="–", eps="–")

        def on_round(p: runner.Progress) -> None:
            fields = {"eps": "–" if p.epsilon is None else f"{p.epsilon:.3g}"}
            if p.record is not None:
                fields["acc"] = f"{p.record.accuracy:.3f}"
            bar.update(task, completed=p.round, **fields)

        try:
            result = runner.run(
                spec,
                data_dirs=data_dirs(),
                cache_dir=cache_dir(),
                download=download,
                on_round=on_round,
                device=where,
            )
        except DpflError:
            if not bar.tasks[0].completed:  # nothing ran (files missing, say): the error line is all
                console.quiet = True  # the bar's last frame would print before it
            raise
    data = result.to_json()
    if out is not None:
        out.write_text(json.dumps(data, indent=1))
    final, privacy = data["final"], data["privacy"]
    eps = (
        "not private"
        if privacy["epsilon"] is None
        else f"ε = {privacy['epsilon']:.4g} (δ = {number_text(privacy['delta'])}, {privacy['accountant']})"
    )
    threads = data["timings"]["threads"]
    # a dataset reported in balanced accuracy (Creditcard) has it beside the accuracy
    balanced = final["balanced_accuracy"] if dataset_info(spec.dataset.name).metric != "accuracy" else None
    console.print(
        f"final accuracy {final['accuracy']:.4f}"
        + ("" if balanced is None else f", balanced accuracy {balanced:.4f}")
        + f", loss {final['loss']:.4f}; {eps}; "
        f"{data['timings']['total_s']:.1f} s on "
        + (f"{threads} torch thread{'' if threads == 1 else 's'}" if where.type == "cpu" else str(where))
        + (f"; written to {out}" if out else "")
    )
    if privacy.get("warning"):
        console.print(f"[bold yellow]warning:[/] {privacy['warning']}")
    for caveat in privacy["caveats"]:
        if not caveat["breaks_guarantee"]:  # the breaking ones are in the warning
            console.print(f"caveat ({caveat['kind']}): {caveat['text']}", highlight=False)
    if final["diagnostics"]:
        shown = ", ".join(f"{k} {v:.4g}" for k, v in final["diagnostics"].items())
        console.print(f"diagnostics (not private): {shown}", highlight=False)


def _folder_found(folder: str) -> str:
    """Returns where a dataset read from a folder (no fixed file list) is: the first data folder's
    `folder` that holds files, else where to put them (there is nothing to download)."""
    for root in [*data_dirs(), cache_dir()]:
        here = Path(root) / folder
        if here.is_dir() and any(here.iterdir()):
            return str(here)
    return f"missing: put its files in $DPFL_DATA_DIR/{folder}/ (nothing to download; see its source)"


def datasets(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the datasets, where each is found, and how to get it."""
    from dpfl.data import dataset_info, registered_datasets
    from dpfl.data.files import locate

    rows = []
    for name in registered_datasets():
        info = dataset_info(name)
        if not info.needs_files:
            where = "bundled or generated"
        elif info.folder is not None:
            where = _folder_found(info.folder)
        elif not info.files:
            where = "your own file (option `path`)"
        else:
            try:
                found = locate(
                    list(info.files), search_dirs=data_dirs(), cache_dir=cache_dir(), download=False
                )
                where = str(Path(next(iter(found.values()))).parent)
            except DatasetUnavailable:
                folder = Path(info.files[0].relpath).parent
                where = f"missing: put the files in $DPFL_DATA_DIR/{folder} or use --download"
        rows.append(
            {
                "name": name,
                "classes": info.num_classes,
                "silos": info.natural_silos,
                "found": where,
                "source": info.source_url,
                "license": info.license,
                "description": info.description,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="datasets")
    for col in ("name", "classes", "silos", "found", "source"):
        table.add_column(col)
    for row in rows:
        table.add_row(
            *(
                str(row[c] if row[c] is not None else "–")
                for c in ("name", "classes", "silos", "found", "source")
            )
        )
    Console().print(table)


def algorithms(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the algorithms: privacy notion, paper and what each does (the registry, plugins included)."""
    from dpfl.algorithms import ALGORITHMS

    rows = [
        {"name": name, "notion": cls.notion, "paper": cls.paper, "summary": cls.summary}
        for name, cls in ((name, ALGORITHMS[name]) for name in ALGORITHMS)
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="algorithms")
    for col in ("name", "notion", "paper", "summary"):
        table.add_column(col)
    for row in rows:
        table.add_row(*(row[c] for c in ("name", "notion", "paper", "summary")))
    Console().print(table)


def demo() -> None:
    """Runs a small sweep on the bundled digits data and prints accuracy against ε."""
    from dpfl import runner
    from dpfl.spec import parse_spec

    console = Console()
    base = {
        "dataset": {"name": "digits", "silos": 10},
        "model": {"name": "mlp", "hidden": [64]},
        "rounds": 30,
        "eval_every": 30,
    }
    points = [("fedavg", None, {"lr": 0.1, "local_steps": 5})] + [
        ("isrl_mbsgd", eps, {"lr": 0.5, "batch_size": 64}) for eps in (0.5, 2.0, 8.0)
    ]
    table = Table(title="digits, 10 silos, 30 rounds: accuracy against ε (δ = 1e-5, rdp)")
    for col in ("algorithm", "ε target", "ε spent", "noise multiplier", "test accuracy"):
        table.add_column(col, justify="right")
    for name, eps, params in track(points, description="demo sweep", console=console):
        privacy = None if eps is None else {"epsilon": eps, "delta": 1e-5}
        result = runner.run(parse_spec(base | {"algorithm": name, "params": params, "privacy": privacy}))
        spent, sigma = result.epsilon, result.privacy.noise_multiplier
        table.add_row(
            name,
            "–" if eps is None else f"{eps:g}",
            "∞ (not private)" if spent is None else f"{spent:.3f}",
            "–"
            if sigma is None
            else f"{min(sigma):.3f}–{max(sigma):.3f}"  # one σ per silo
            if isinstance(sigma, list)
            else f"{sigma:.3f}",
            f"{result.final.accuracy:.3f}",
        )
    console.print(table)
