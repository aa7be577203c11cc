"""`dpfl reproduce PAPER`: a paper's sweeps, here with progress bars or on a server, then the report."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dpfl.cli.settings import DEVICE_HELP, cache_dir, data_dirs
from dpfl.errors import DpflError, SpecError
from dpfl.papers import PAPERS

# The reproduction machinery (pydantic configs; runs, reports and a server's client import torch
# or plotly) is imported by the command: other commands start without it.
if TYPE_CHECKING:
    import torch

    from dpfl import runner
    from dpfl.reproduce import Outcome, Sweep
    from dpfl.reproduce import server as remote
    from dpfl.spec import RunSpec

__all__ = ["reproduce"]

_PAPER_HELP = "The paper: " + ", ".join(f"{p.key} (seed {p.seed})" for p in PAPERS.values()) + "."


def reproduce(
    paper: Annotated[str, typer.Argument(metavar="PAPER", help=_PAPER_HELP)],
    quick: Annotated[
        bool,
        typer.Option("--quick", help="The reduced sweep of each config (fewer rounds, points and seeds)."),
    ] = False,
    seeds: Annotated[
        int | None, typer.Option("--seeds", help="Runs per cell (default: the config's).")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Folder for report.html and summary.csv (default reproduce-PAPER)."),
    ] = None,
    server: Annotated[
        str | None,
        typer.Option(
            "--server", help="URL of a running `dpfl up`: the sweeps run there and show in its dashboard."
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", envvar="DPFL_TOKEN", help="Bearer token, if the server wants one."),
    ] = None,
    configs: Annotated[
        Path | None,
        typer.Option("--configs", help="Folder of paper configs (default: the repository's configs/paper)."),
    ] = None,
    doc: Annotated[
        Path | None,
        typer.Option(
            "--doc",
            help="A Markdown file (docs/reproduction.md) whose section for PAPER is replaced by the new one.",
        ),
    ] = None,
    device: Annotated[
        str | None, typer.Option("--device", help=DEVICE_HELP + " Here only: a server's workers use theirs.")
    ] = None,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--setting",
            help="Run only this setting of the paper (its config's name without the paper, e.g. "
            "cifar10); repeat for several. Without it, every setting whose dataset files are here.",
        ),
    ] = None,
) -> None:
    """Reproduce a paper's experiments; write DIR/report.html (offline), summary.csv and reproduction.md."""
    from dpfl.reproduce import chosen_settings, default_config_dir, load_paper, quick_settings
    from dpfl.reproduce import server as remote
    from dpfl.reproduce.calibration import local_projector, paper_calibrations
    from dpfl.reproduce.markdown import markdown, splice
    from dpfl.reproduce.report import Report, write_csv, write_html
    from dpfl.reproduce.summary import corrections, sensitivity, summary_rows, verdicts

    start, started = time.perf_counter(), dt.datetime.now().astimezone()
    if seeds is not None and seeds < 1:
        raise SpecError("--seeds", f"must be an integer ≥ 1; got {seeds}.")
    if doc is not None and not doc.is_file():
        raise SpecError("--doc", f"names no file; got {str(doc)!r}. Give an existing Markdown file.")
    from dpfl.device import resolve_device

    where = resolve_device(device, field="--device")
    settings = chosen_settings(load_paper(paper, configs or default_config_dir()), setting)
    console = Console(stderr=True)
    left_out: dict[str, str] = {}
    if quick:
        settings, skipped = quick_settings(settings)
        for name, why in skipped.items():
            console.print(escape(f"{name}: left out of --quick ({why})"))
            left_out[name] = f"by --quick: {why}"
    sweeps = [s.sweep(quick=quick, seeds=seeds) for s in settings]
    links: dict[str, str] = {}
    if server is None:
        # a setting named with --setting must run; the others wait for their files
        sweeps, absent = _with_data(sweeps, required=bool(setting))
        for name, why in absent.items():
            console.print(escape(f"{name}: left out ({why})"), soft_wrap=True)
            left_out[name] = why
        settings = [s for s in settings if s.name not in absent]
        outcomes = _run_here(sweeps, console, where)
        with console.status("accounting the papers' own noise calibration"):
            projector = local_projector(data_dirs=data_dirs(), cache_dir=cache_dir())
            calibrations, unprojected = paper_calibrations(sweeps, projector)
    else:
        client = remote.Client(server, token=token)
        try:
            outcomes, links = _run_on_server(client, sweeps, paper=paper, quick=quick, console=console)
            with console.status("accounting the papers' own noise calibration on the server"):
                calibrations, unprojected = paper_calibrations(sweeps, remote.projector(client))
        finally:
            client.close()
    blocks = {s.name: s.block for s in settings}
    rows = summary_rows(outcomes, blocks)
    report = Report(
        paper=PAPERS[paper],
        settings=settings,
        sweeps=sweeps,
        outcomes=outcomes,
        rows=rows,
        verdicts=verdicts(outcomes, rows, blocks),
        sensitivity=sensitivity(outcomes, rows, blocks),
        corrections=corrections(outcomes),
        calibrations=calibrations,
        unprojected=unprojected,
        quick=quick,
        left_out=left_out,
        started=started,
        wall_s=time.perf_counter() - start,
        where="local" if server is None else server,
        links=links,
    )
    folder = out or Path(f"reproduce-{paper}")
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(rows, folder / "summary.csv")
    write_html(report, folder / "report.html")
    section = markdown(report)
    (folder / "reproduction.md").write_text(section, encoding="utf-8")
    if doc is not None:
        try:
            doc.write_text(splice(doc.read_text(encoding="utf-8"), paper, section), encoding="utf-8")
        except ValueError as exc:
            raise SpecError("--doc", f"cannot be updated: {exc}.") from None
        console.print(f"replaced the {paper} section of {doc}", soft_wrap=True)
    for v in report.verdicts:
        console.print(
            f"[bold]{escape(v.verdict)}[/]: {escape(v.claim.text)} ({escape(v.detail)})", soft_wrap=True
        )
    if report.corrections:
        console.print(
            f"[bold yellow]privacy:[/] {len(report.corrections)} finding(s) where the stated ε does not "
            "cover all that runs released (report.html, privacy corrections, says which and why)"
        )
    under = [c for c in calibrations if c.under_protects]
    if under:
        worst = max(under, key=lambda c: c.epsilon / c.target_epsilon)
        console.print(
            f"[bold yellow]privacy:[/] the paper's own σ under-protects in {len(under)} of "
            f"{len(calibrations)} cells (worst: {escape(worst.line())})",
            soft_wrap=True,
        )
    console.print(
        f"wrote {folder / 'report.html'}, {folder / 'summary.csv'} and {folder / 'reproduction.md'}: "
        f"{len(outcomes)} runs, {report.wall_s:.0f} s wall time",
        soft_wrap=True,
    )
    failed = [o for o in outcomes if o.status != "succeeded"]
    if failed:
        first = (failed[0].error or failed[0].status).splitlines()[0]
        raise DpflError(
            f"{len(failed)} of {len(outcomes)} runs did not succeed (first: {failed[0].label}: {first}); "
            "the report lists them"
        )


def _with_data(sweeps: Sequence[Sweep], *, required: bool) -> tuple[list[Sweep], dict[str, str]]:
    """Returns the sweeps whose datasets' files are here, and each other setting with where to put
    its files. Refuses, in one line naming the files, when a required setting (or every one) lacks them."""
    from dpfl.reproduce.local import missing_files

    kept, absent = [], {}
    for sweep in sweeps:
        missing = missing_files([sweep], data_dirs=data_dirs(), cache_dir=cache_dir())
        if not missing:
            kept.append(sweep)
            continue
        now = os.environ.get("DPFL_DATA_DIR") or "unset"
        absent[sweep.setting] = "; ".join(
            f"dataset {name!r} not found: put "
            + ", ".join(f"{' and '.join(files)} in $DPFL_DATA_DIR/{folder}/" for folder, files in places)
            + f" (now {now}) or fetch it with `dpfl run SPEC --download`"
            for name, places in missing.items()
        )
    if absent and (required or not kept):
        raise DpflError(next(iter(absent.values())))
    return kept, absent


def _run_here(sweeps: Sequence[Sweep], console: Console, device: torch.device) -> list[Outcome]:
    """Returns the outcomes of running every point here, with a bar over points and one over rounds."""
    from dpfl.reproduce.local import run_sweeps

    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    ]
    total = sum(len(s.points) for s in sweeps)
    with Progress(*columns, console=console) as bar:
        points = bar.add_task("runs", total=total, status="")
        rounds = bar.add_task("", total=1, status="")

        def on_point(index: int, _total: int, label: str, spec: RunSpec) -> None:
            bar.update(points, completed=index)
            bar.reset(rounds, total=spec.rounds, description=escape(label), status="")

        def on_round(p: runner.Progress) -> None:
            status = "" if p.record is None else f"acc {p.record.accuracy:.3f}"
            if p.epsilon is not None:
                status += f"  ε {p.epsilon:.3g}"
            bar.update(rounds, completed=p.round, status=status)

        outcomes = run_sweeps(
            sweeps,
            data_dirs=data_dirs(),
            cache_dir=cache_dir(),
            on_point=on_point,
            on_round=on_round,
            device=device,
        )
        bar.update(points, completed=total)
    return outcomes


def _run_on_server(
    client: remote.Client, sweeps: Sequence[Sweep], *, paper: str, quick: bool, console: Console
) -> tuple[list[Outcome], dict[str, str]]:
    """Returns the outcomes of the sweeps run on the server, and each setting's dashboard link."""
    from dpfl.reproduce import server as remote

    ids, links = [], {}
    for sweep in sweeps:
        name = f"reproduce {paper}: {sweep.setting}" + (" (quick)" if quick else "")
        sweep_ids = remote.submit(client, sweep, name=name)
        ids.append(sweep_ids)
        links[sweep.setting] = f"{client.url}/#/compare?sweep={sweep_ids[0]}"
        console.print(
            f"submitted {escape(name)}: {len(sweep.points)} runs; {links[sweep.setting]}", soft_wrap=True
        )
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[finished]}"),
        TimeElapsedColumn(),
    ]
    total = sum(len(s.points) for s in sweeps)
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("runs on the server", total=total, finished="")

        def on_progress(progress: float, finished: int, runs: int) -> None:
            bar.update(task, completed=progress, total=runs, finished=f"{finished}/{runs} finished")

        remote.wait(client, [i for sweep_ids in ids for i in sweep_ids], on_progress=on_progress)
    outcomes = [
        o for sweep, i in zip(sweeps, ids, strict=True) for o in remote.fetch_outcomes(client, sweep, i)
    ]
    return outcomes, links
