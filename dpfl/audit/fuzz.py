"""Sensitivity fuzzing: how far one protected unit moves a release, against what its noise assumes.

For an algorithm and a pair of neighbouring datasets (`neighbours`), the fuzzer runs the
algorithm's real first round on D and on D′ under the release tap with the noise off
(`dpfl.engine.release.tap(noise=False)`), so every release site reports its pre-noise value
v and the noise std s it would add. The sensitivity the code *claims* for a release is

    Δ_claimed = s / σ,

with σ the noise multiplier of the ledger event that party recorded for the round (the
accountant's ε assumes exactly a Gaussian of std σ·Δ). The fuzzer measures ‖v_D − v_D′‖ and
reports the ratio ‖v_D − v_D′‖ / Δ_claimed. A sound release has ratio ≤ 1 for every pair of
neighbours; a ratio above 1 is a proof that the noise is too small for what the ledger says
(e.g. ULDP-NAIVE, whose noise assumes |S|·C where a user moves the sum by up to 2|S|·C).

A release's rows are silos. When the call site says only their sum is revealed (`secure_sum`:
DP-FedSGD's shares, ULDP's noisy sum over silos), the release is the sum, with std √Σs²;
otherwise each row is a release of its own silo's party (`silo-i`).

Only the first release call of the round is compared: a later call (a second local step)
starts from the previous release, which differs between D and D′ once the noise is off, so
its gap is not a sensitivity. Sampling must be fixed: the coverage table sets the params that
make every sampling rate 1 (all records, users, agents take part), so D and D′ see the same
sample and differ only in the unit; amplification by sampling is the accountant's business.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from dpfl.algorithms import Algorithm, algorithm_class
from dpfl.algorithms.voting.cache import clear_vote_cache
from dpfl.algorithms.voting.split import carve_public_pool
from dpfl.audit.coverage import Coverage, all_records
from dpfl.audit.local import LOCAL_COVERAGE
from dpfl.audit.masks import key_masks_by_record
from dpfl.audit.neighbours import (
    Neighbours,
    agent_neighbours,
    append_record,
    canary_agent_neighbours,
    canary_user_neighbours,
    dirac_neighbours,
    heavy_user_neighbours,
    opposed_replacement_neighbours,
    record_neighbours,
    replacement_neighbours,
    user_neighbours,
)
from dpfl.engine.noise import model_draws
from dpfl.engine.release import Release, tap
from dpfl.errors import SpecError
from dpfl.federation import FederatedData
from dpfl.models import draws_randomness
from dpfl.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    GDPEvent,
    GroupEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    VoteEvent,
)
from dpfl.spec import RunSpec, parse_spec

__all__ = [
    "COVERAGE",
    "NOT_COVERED",
    "Coverage",
    "ReleaseGap",
    "check_auditable",
    "coverage_of",
    "fixed_sample_spec",
    "fuzz",
]

TOLERANCE = 1e-4
"""A ratio up to 1 + TOLERANCE is sound: releases are float32 sums of clipped rows, each rounded
to 2⁻²⁴ relative; a sum of n rows may be off by up to n·2⁻²⁴ (6·10⁻⁵ for 10³ rows), and a
correct release was measured at 1 + 1.5·10⁻⁶. A real bug is off by a factor, not by 10⁻⁴."""


# Pairs are built as they are asked for: a canary's pair copies the training set.
def _user_neighbours(algorithm: Algorithm) -> Iterator[Neighbours]:
    # ULDP-NAIVE needs no allocation: then only the planted users are known.
    data = algorithm.data
    if data.users is not None:
        yield from user_neighbours(data)
    yield from heavy_user_neighbours(data)
    yield from canary_user_neighbours(data, algorithm.model)


def _agent_neighbours(data: FederatedData) -> Iterator[Neighbours]:
    yield from agent_neighbours(data)
    yield from canary_agent_neighbours(data)


def _replacement_neighbours(algorithm: Algorithm) -> Iterator[Neighbours]:
    data, radius = algorithm.data, algorithm.params.feature_clip
    yield from replacement_neighbours(data)
    if radius is not None:
        yield from opposed_replacement_neighbours(data, radius=radius)


def _whole_agent(algorithm: Algorithm) -> list[Neighbours]:
    # kNN needs ≥ k records per agent, so only the neighbour that removes a full agent.
    return agent_neighbours(algorithm.data)[:1]


def _knn_records(algorithm: Algorithm) -> list[Neighbours]:
    """Returns the record neighbours, plus a record placed on public query 0 (twice, two labels).

    A record at distance 0 from a query enters every feature space's k nearest and evicts the
    k-th neighbour: with a label unlike the evicted one, the vote moves by exactly √2/k. The
    pool is public, so the adversary may place it. It is the pool the audited runs will carve
    from `algorithm.data` (same seed), not the one `algorithm` carved from the full test set.
    """
    data, p = algorithm.data, algorithm.params
    query = carve_public_pool(data, size=p.public_pool, seed=algorithm.spec.seed).pool_x[0]
    silo = len(data.silos) - 1
    out = list(record_neighbours(data, silos=[silo]))
    for label in (0, 1):
        placed = append_record(data, silo, query, label)
        out.append(
            Neighbours(f"silo {silo}: a record of label {label} on public query 0 added", placed, data)
        )
    return out


# Record-level DP-SGD: the black-box trials add a Dirac canary, whose weights no other record moves.
_RECORDS = Coverage(record_neighbours, all_records, black_box=dirac_neighbours)

COVERAGE: dict[str, Coverage] = {
    "isrl_mbsgd": _RECORDS,
    "isrl_proxsgd": _RECORDS,
    "isrl_spider": _RECORDS,  # round 1 starts a phase: MB-SGD's release
    "isrl_spider_alt": _RECORDS,  # round 1: one fresh gradient, MB-SGD's
    "isrl_localsgd": _RECORDS,  # the first local step
    "dp_fedsgd": _RECORDS,
    "dp_fedavg": Coverage(_agent_neighbours, lambda data: {"sample_rate": 1.0}),
    "uldp_naive": Coverage({"user": _user_neighbours}),
    "uldp_sgd": Coverage({"user": _user_neighbours}, lambda data: {"user_sampling_rate": 1.0}),
    "uldp_avg": Coverage({"user": _user_neighbours}, lambda data: {"user_sampling_rate": 1.0}),
    "uldp_avg_w": Coverage({"user": _user_neighbours}, lambda data: {"user_sampling_rate": 1.0}),
    # Record-level DP-SGD per silo, user level by group privacy: a user (≤ k kept records)
    # moves a silo's clipped sum by ≤ k·C against a record's C (the first DP-SGD step).
    "uldp_group": Coverage({"user": _user_neighbours}, all_records),
    "gdp_gd": Coverage({"gdp": _replacement_neighbours}),
    "gdp_localnewton": Coverage({"gdp": _replacement_neighbours}),  # the first gradient release
    # The summed vote histogram before the noisy argmax (the argmax is post-processing): one
    # agent moves a query's sum by ≤ 1; one record by ≤ √2 (AE: a flipped label) or √2/k (kNN).
    "ae_dpfl": Coverage(
        {"agent": lambda a: agent_neighbours(a.data), "instance": lambda a: record_neighbours(a.data)},
        per_query=True,
    ),
    # AE-DPFL+DA: the same votes, from local models that also trained on the public pool
    "ae_dpfl_da": Coverage(
        {"agent": lambda a: agent_neighbours(a.data), "instance": lambda a: record_neighbours(a.data)},
        per_query=True,
    ),
    "knn_dpfl": Coverage({"agent": _whole_agent, "instance": _knn_records}, per_query=True),
}
"""The private algorithms the fuzzer covers, by registry name."""

NOT_COVERED: dict[str, str] = {}
"""Private algorithms without audit coverage yet, and why (the conformance test names them)."""


def coverage_of(name: str) -> Coverage | None:
    """Returns how the fuzzer covers the algorithm `name`: this table's entry for a built-in one,
    else what its class declares (`Algorithm.audit_coverage`, how a plugin declares it); None when
    it is not covered."""
    return COVERAGE.get(name) or algorithm_class(name).audit_coverage


def check_auditable(name: str) -> None:
    """Raises SpecError naming `algorithm` for an algorithm the auditor cannot audit: one that is
    not private (nothing to audit), or one that is private but declares no coverage ("not
    auditable yet", never "not private"). Here, not in `rounds`, so that every run's projection
    asks it without loading the trials' statistics (scipy.stats; issue 43)."""
    if name in LOCAL_COVERAGE or coverage_of(name) is not None:
        return
    if algorithm_class(name).notion == "none":
        raise SpecError(
            "algorithm", f"{name!r} is not private: it releases without noise, so there is nothing to audit."
        )
    why = NOT_COVERED.get(
        name, "it declares no audit coverage (`Algorithm.audit_coverage`, a `dpfl.audit.coverage.Coverage`)"
    )
    raise SpecError("algorithm", f"{name!r} is not auditable yet: {why}.")


@dataclass(frozen=True)
class ReleaseGap:
    """One release of round 1 on two neighbours: how far it moved and what its noise assumed.

    Attributes:
        party: the ledger party the release belongs to.
        neighbours: what differs between D and D′.
        gap: ‖v_D − v_D′‖, the release's move without noise.
        noise_std: the std the code added (√Σs² for a secure sum).
        noise_multiplier: σ of the party's ledger event for the round.
        value_d, value_d_prime: the pre-noise releases (for the statistical audit).
    """

    party: str
    neighbours: str
    gap: float
    noise_std: float
    noise_multiplier: float
    value_d: np.ndarray = field(repr=False)
    value_d_prime: np.ndarray = field(repr=False)
    event: Event | None = field(default=None, repr=False)

    @property
    def claimed_sensitivity(self) -> float:
        """Returns the sensitivity the noise was calibrated for: noise_std / σ."""
        return self.noise_std / self.noise_multiplier

    @property
    def ratio(self) -> float:
        """Returns gap / claimed sensitivity: ≤ 1 for a sound release."""
        return self.gap / self.claimed_sensitivity


def fixed_sample_spec(spec: RunSpec, data: FederatedData) -> RunSpec:
    """Returns `spec` with the params its coverage sets so that every sampling rate is 1."""
    overrides = coverage_of(spec.algorithm).fixed_sample(data)
    if not overrides:
        return spec
    raw = spec.to_json()
    return parse_spec(raw | {"params": dict(raw.get("params") or {}) | overrides})


def fuzz(
    algorithm: Algorithm,
    noise_multiplier: float | np.ndarray,
    *,
    neighbours: list[Neighbours] | None = None,
) -> list[ReleaseGap]:
    """Returns every round-1 release gap of `algorithm` on its notion's neighbours (or those given).

    Args:
        algorithm: a prepared algorithm (`dpfl.runner.prepare`); its spec, data and model are
            copied for each run, never changed.
        noise_multiplier: σ as `setup` takes it (one, or one per silo).
        neighbours: the pairs to compare (default: the coverage table's for the algorithm).
    """
    coverage = coverage_of(type(algorithm).name)
    pairs = neighbours if neighbours is not None else coverage.pairs(algorithm)
    out: list[ReleaseGap] = []
    for pair in pairs:
        rel_d, events = _first_round(algorithm, pair.d, noise_multiplier, pair.start)
        rel_dp, _ = _first_round(algorithm, pair.d_prime, noise_multiplier, pair.start)
        if not coverage.per_query:
            out.extend(_gaps(rel_d, rel_dp, events, pair.name))
            continue
        for q in range(rel_d.value.shape[1]):
            one = {party: [evs[q]] for party, evs in events.items()}
            d, dp = (dataclasses.replace(r, value=r.value[:, q]) for r in (rel_d, rel_dp))
            out.extend(_gaps(d, dp, one, f"{pair.name}; query {q}"))
    return out


def _first_round(
    algorithm: Algorithm, data: FederatedData, noise_multiplier, start: torch.Tensor | None = None
) -> tuple[Release, dict[str, list[Event]]]:
    """Returns the first release call of round 1 on `data` (noise off) and the round's ledger events.

    `start`: the model round 1 starts from instead of the initial one (`Neighbours.start`).
    """
    # The vote cache is keyed by the spec, not the data: D and D′ would share one entry, and
    # a neighbour's votes would outlive the audit. So it is emptied before and after.
    clear_vote_cache()
    try:
        run = type(algorithm)(algorithm.spec, data, copy.deepcopy(algorithm.model))
        draws = contextlib.nullcontext()
        if draws_randomness(run.model):
            # Dropout: the run's masks are i.i.d. by slot, so its guarantee is about the coupling
            # where each record common to D and D′ keeps its own masks. At one key, slot masks
            # are not that coupling where D′ changes the batch's layout (every other record moves
            # to another slot: gaps of 7-11 C on a sound release). So the masks are keyed by record
            # (`dpfl.audit.masks`: still drawn in the forward pass the engine clips), and any
            # other draw comes from round 1's generator of the run's key, as the runner's does.
            key_masks_by_record(run.model, key=run.noise_key, round=1)
            draws = model_draws(run.noise_key, 1)
        run.setup(noise_multiplier)
        if start is not None:
            run.w = start.to(run.w.dtype).clone()
        with draws, tap(noise=False) as releases:
            out = run.round(1)
    finally:
        clear_vote_cache()
    if not releases:
        raise ValueError(f"{algorithm.name} made no Gaussian release in round 1; nothing to audit")
    return releases[0], out.releases


def _gaps(d: Release, dp: Release, events: dict[str, list[Event]], name: str) -> list[ReleaseGap]:
    if d.secure_sum:
        party = _sum_party(events, d.silos)
        value_d, value_dp = d.value.sum(0), dp.value.sum(0)
        std = math.sqrt(float(np.sum(d.std**2)))
        sigma = max(_noise_multiplier(events[p]) for p in party)
        event = _single(events[party[0]])
        return [
            _gap(
                ", ".join(sorted(set(party))) if len(set(party)) > 1 else party[0],
                name,
                value_d,
                value_dp,
                std,
                sigma,
                event,
            )
        ]
    rows_dp = {s: i for i, s in enumerate(dp.silos)}
    out = []
    for i, s in enumerate(d.silos):
        party = _row_party(events, s)
        other = dp.value[rows_dp[s]] if s in rows_dp else torch.zeros_like(d.value[i])
        sigma = _noise_multiplier(events[party])
        out.append(_gap(party, name, d.value[i], other, float(d.std[i]), sigma, _single(events[party])))
    return out


def _gap(party, name, value_d, value_dp, std, sigma, event) -> ReleaseGap:
    a = value_d.detach().double().numpy().ravel()
    b = value_dp.detach().double().numpy().ravel()
    return ReleaseGap(party, name, float(np.linalg.norm(a - b)), std, sigma, a, b, event)


def _row_party(events: dict[str, list[Event]], silo: int) -> str:
    """Returns the party of a silo's own release: `silo-i`, or the round's only party."""
    if f"silo-{silo}" in events:
        return f"silo-{silo}"
    if len(events) == 1:
        return next(iter(events))
    raise ValueError(f"cannot tell which ledger party released silo {silo}'s row; parties: {sorted(events)}")


def _sum_party(events: dict[str, list[Event]], silos: tuple[int, ...]) -> list[str]:
    """Returns the parties a secure sum protects: the round's only party, or the listed silos'."""
    if len(events) == 1:
        return [next(iter(events))]
    return [_row_party(events, s) for s in silos]


def _single(events: list[Event]) -> Event:
    return events[0] if len(events) == 1 else ComposedEvent(tuple(events))


def _noise_multiplier(events: list[Event]) -> float:
    """Returns the one σ of the Gaussian releases in a party's round events (GDP μ = 1/σ)."""
    found: set[float] = set()

    def walk(e: Event, scale: float = 1.0) -> None:
        if isinstance(e, GaussianEvent):
            found.add(float(e.noise_multiplier) * scale)
        elif isinstance(e, VoteEvent):  # noise std σ on a sum of sensitivity Δ: multiplier σ/Δ
            found.add(float(e.noise_std) / float(e.sensitivity) * scale)
        elif isinstance(e, GDPEvent):
            found.add(scale / float(e.mu))
        elif isinstance(e, GroupEvent):
            # Group privacy for k units: the claim is k record-level sensitivities, so the
            # multiplier against a user's move is σ/k (the group conversion's ε is never below
            # the Gaussian's at σ/k, so the audit's comparison stays one-sided).
            walk(e.event, scale / e.group_size)
        elif isinstance(e, PoissonSampledEvent | SelfComposedEvent):
            walk(e.event, scale)
        elif isinstance(e, ComposedEvent | ParallelEvent):
            for inner in e.events:
                walk(inner, scale)
        else:
            raise ValueError(f"the fuzzer reads σ from Gaussian and GDP events; found {type(e).__name__}")

    for e in events:
        walk(e)
    if len(found) != 1:
        raise ValueError(f"expected one noise multiplier in the round's events; found {sorted(found)}")
    return found.pop()
