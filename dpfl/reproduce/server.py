"""Running a reproduction on a DP-FL Explorer server: submit each sweep, follow it, read it back.

Only the public HTTP API is used (``POST /api/sweeps``, ``GET /api/sweeps/{id}``,
``GET /api/runs/{id}/spec`` and ``/metrics``, ``POST /api/privacy/project``), so the sweeps, their runs and
ledgers land in the server's database and show on its Compare page like any other sweep. The
server expands the grid with the same `dpfl.sweep.expand`; each run's own spec then says which
cell it belongs to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from dpfl.data import headline_metric
from dpfl.errors import DpflError
from dpfl.reproduce.calibration import Projector
from dpfl.reproduce.manifest import Sweep
from dpfl.reproduce.summary import Outcome, largest

__all__ = ["Client", "ServerError", "fetch_outcomes", "projector", "submit", "wait"]

FINISHED = ("succeeded", "failed", "cancelled")
OnProgress = Callable[[float, int, int], None]  # (runs' progress summed, finished runs, all runs)


class ServerError(DpflError):
    """The server cannot be reached or refused a request; the message says what it answered."""


class Client:
    """A thin JSON client of one server, with an optional bearer token for writes."""

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 30.0):
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def request(self, method: str, path: str, *, what: str, **kwargs: Any) -> Any:
        """Returns the JSON answer; raises ServerError naming `what` was asked and what came back."""
        response = self.send(method, path, **kwargs)
        if response.status_code >= 400:
            raise ServerError(f"the server refused to {what}: {_reason(response)}")
        return response.json()

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Returns the server's response, whatever its status; raises ServerError if it cannot be reached."""
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ServerError(
                f"cannot reach the server at {self.url} ({exc}); start one with `dpfl up` or fix --server"
            ) from None


def _reason(response: httpx.Response) -> str:
    """Returns the server's error as one line: `field` message for a 422, else its detail."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    detail = body.get("detail") if isinstance(body, dict) else body
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        loc = [str(p) for p in detail[0].get("loc", []) if p != "body"]
        return f"`{'.'.join(loc)}` {detail[0].get('msg', '')}".strip()
    return f"{detail} (HTTP {response.status_code})"


def submit(client: Client, sweep: Sweep, *, name: str) -> list[str]:
    """Returns the ids of the sweeps the server created and queued for `sweep`: one, and one more
    per candidate of a tuned method (`Sweep.submissions`)."""
    what = f"create the sweep of {sweep.setting}"
    bodies = [{"name": name, "base": base, "grid": grid} for base, grid in sweep.submissions()]
    return [str(client.request("POST", "/api/sweeps", json=body, what=what)["id"]) for body in bodies]


def wait(
    client: Client,
    sweep_ids: Sequence[str],
    *,
    on_progress: OnProgress | None = None,
    poll_s: float = 1.0,
) -> None:
    """Returns once every run of the sweeps has finished (succeeded, failed or cancelled)."""
    while True:
        progress, finished, total = 0.0, 0, 0
        for sweep_id in sweep_ids:
            sweep = client.request("GET", f"/api/sweeps/{sweep_id}", what=f"show sweep {sweep_id}")
            num = sweep["num_runs"]
            progress += sweep["progress"] * num
            finished += sum(sweep["counts"].get(status, 0) for status in FINISHED)
            total += num
        if on_progress is not None:
            on_progress(progress, finished, total)
        if finished >= total:
            return
        time.sleep(poll_s)


def fetch_outcomes(client: Client, sweep: Sweep, sweep_ids: Sequence[str]) -> list[Outcome]:
    """Returns the outcome of every run of the finished sweeps submitted for `sweep`, each placed
    in its cell by its own spec."""
    runs = [
        run
        for sweep_id in sweep_ids
        for run in client.request("GET", f"/api/sweeps/{sweep_id}", what=f"show sweep {sweep_id}")["runs"]
    ]
    outcomes = []
    for run in runs:
        spec = client.request("GET", f"/api/runs/{run['id']}/spec", what=f"show the spec of run {run['id']}")
        cell = sweep.cell(spec)
        done = run["status"] == "succeeded"
        metrics = (
            client.request(
                "GET", f"/api/runs/{run['id']}/metrics", what=f"read the metrics of run {run['id']}"
            )
            if done
            else []
        )
        metric = headline_metric(spec["dataset"]["name"])  # Creditcard's is balanced accuracy
        final = _final(run, metric, metrics)
        outcomes.append(
            Outcome(
                **cell._asdict(),
                setting=sweep.setting,
                status=run["status"],
                accuracy=final if done else None,
                loss=run["final_loss"] if done else None,
                train_loss=((metrics[-1].get("diagnostics") or {}).get("train_loss") if metrics else None),
                epsilon=run["epsilon"],
                target_epsilon=run["target_epsilon"],
                sigma=largest(run["noise_multiplier"]),
                error=run["error"] or (None if done else f"run {run['id']} {run['status']}"),
                duration_s=run["duration_s"],
                curve=tuple((m["round"], m.get(metric), m["loss"]) for m in metrics),
            )
        )
    return outcomes


def _final(run: dict[str, Any], metric: str, metrics: Sequence[dict[str, Any]]) -> float | None:
    """Returns a run's final test value in `metric` as the server serves it on the run
    (``final_accuracy``, ``final_balanced_accuracy``), as the Runs list, Compare and the sweep
    summaries read it; from its last evaluated round only where the server does not serve that
    field (one older than balanced accuracy on the run)."""
    field = f"final_{metric}"
    if field in run:
        return run[field]
    return metrics[-1].get(metric) if metrics else None


def projector(client: Client) -> Projector:
    """Returns a projector that asks the server (`POST /api/privacy/project`), whose workers hold the data."""

    def project(spec_json: dict[str, Any]) -> tuple[float, float | list[float]] | None:
        response = client.send("POST", "/api/privacy/project", json=spec_json)
        if response.status_code == 422 and _field(response) == "privacy.calibration":
            return None  # the paper gives no closed form for this method
        if response.status_code >= 400:
            raise ServerError(f"the server refused to project {spec_json['algorithm']}: {_reason(response)}")
        body = response.json()
        return body["epsilon"], body["noise_multiplier"]

    return project


def _field(response: httpx.Response) -> str:
    """Returns the dotted field a 422 names ("" if none)."""
    try:
        detail = response.json()["detail"]
        return ".".join(str(p) for p in detail[0]["loc"] if p != "body")
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
