"""A run's privacy before it trains: where its randomness comes from, what its ε rests on (caveats),
and its projection: the noise multiplier σ (given, from μ, the paper's closed form, or calibrated to
its ε target) and the planned ε per round. `dpfl.runner` re-exports `noise_source`, `caveats` and
`project`; every path to a run's σ comes through `project`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from dpfl.algorithms import Algorithm
from dpfl.algorithms.base import EVERY_SILO
from dpfl.data import dataset_info
from dpfl.errors import AccountingError, SpecError
from dpfl.plausibility import implausible
from dpfl.privacy.accountants import accountant_class, headline_problem
from dpfl.privacy.accountants.gdp import gdp_mu
from dpfl.privacy.accountants.rdp import computed_orders, remember_orders
from dpfl.privacy.calibration import calibrate_noise_multiplier, calibrate_party_noise_multipliers
from dpfl.privacy.calibration.stored import projection_key, read_projection, storable, write_projection
from dpfl.privacy.disclosure import Caveat
from dpfl.privacy.events import gaussian_noise_multipliers
from dpfl.privacy.ledger import Ledger
from dpfl.results import Privacy, ledger_mu
from dpfl.spec import DatasetSpec, RunSpec, check_privacy

__all__ = ["caveats", "noise_source", "project", "uncovered"]


def noise_source(spec: RunSpec, *, protected: bool) -> str:
    """Returns where a run's randomness comes from: "entropy" (OS, never stored) or "seeded" (the spec).

    A protected dataset (one with a privacy budget) always gets "entropy": a budget only sums
    runs with independent noise, and seeded noise can be regenerated from the published spec.

    Raises:
        SpecError: the spec asks for seeded noise on a protected dataset.
    """
    asked = spec.privacy.noise_source if spec.privacy is not None else "auto"
    if protected and asked == "seeded":
        raise SpecError(
            "privacy.noise_source",
            f"must not be `seeded` on dataset {spec.dataset.name!r}: it has a privacy budget, so its "
            "runs draw noise from OS entropy; remove the field or give `auto`.",
        )
    return "entropy" if protected or asked == "entropy" else "seeded"


def caveats(algorithm: Algorithm, *, source: str) -> list[Caveat]:
    """Returns what the run's ε rests on or does not cover, in the order a reader needs them."""
    out = []
    if source == "seeded":
        out.append(
            Caveat(
                "simulation",
                "noise, sampling and participation are drawn from generators seeded by the "
                "spec's seed, so anyone holding the spec can regenerate them; the ε describes the "
                "mechanism, not a protection of this data (a dataset with a budget gets OS entropy)",
            )
        )
    out += [
        Caveat("preprocessing", f"{step}, without noise: not covered by the ledger", breaks_guarantee=True)
        for step in algorithm.data.fitted
    ]
    if algorithm.trusted is not None:
        out.append(Caveat("trusted", algorithm.trusted))
    if algorithm.public_inputs is not None:
        out.append(Caveat("public_data", algorithm.public_inputs))
    if algorithm.private and not auditable(type(algorithm).name):
        out.append(
            Caveat(
                "unaudited",
                f"{type(algorithm).name} declares no audit coverage, so the auditor cannot check that its "
                "releases match its ledger",
            )
        )
    if (text := algorithm.privacy_caveat()) is not None:
        out.append(Caveat("data_dependent", text, breaks_guarantee=True))
    return out


def uncovered(privacy: Privacy, dataset: DatasetSpec) -> str | None:
    """Returns what the run releases that its ledger does not cover (its caveats that break the
    guarantee), with the loader options that would fit nothing on the records where they help; None
    when the ledger covers everything. A dataset with a privacy budget runs only the latter."""
    breaking = [c for c in privacy.caveats if c.breaks_guarantee]
    if not breaking:
        return None
    why = "; ".join(c.text for c in breaking)
    unfitted = dict(dataset_info(dataset.name).unfitted)
    if any(c.kind == "preprocessing" for c in breaking) and any(
        dataset.options.get(k) != v for k, v in unfitted.items()
    ):
        why += f"; give dataset.options {json.dumps(unfitted)} to fit nothing on the records"
    return why


def auditable(name: str) -> bool:
    """Returns whether the auditor covers the algorithm `name` (`dpfl.audit.fuzz.check_auditable`)."""
    # The fuzzer imports the algorithms, which import this module; not `dpfl.audit.rounds`,
    # which loads the trials' statistics (scipy.stats, about 1 s) that no projection needs.
    from dpfl.audit.fuzz import check_auditable

    try:
        check_auditable(name)
    except SpecError:
        return False
    return True


def project(algorithm: Algorithm, *, source: str = "seeded", store: Path | None = None) -> Privacy:
    """Returns the run's noise and planned ε per round, without training (calibrating if asked).

    `source` is the run's `noise_source`, which its caveats mention. With `store`, a simulation
    run's σ and planned ε are read from that folder when this spec was projected there before, and
    written there otherwise (`dpfl.privacy.calibration.stored`).
    """
    spec, privacy = algorithm.spec, algorithm.spec.privacy
    check_privacy(spec, algorithm.notion)  # `prepare` checked it too; an algorithm built by hand was not
    if not algorithm.private:
        return Privacy(
            "none",
            None,
            None,
            None,
            None,
            None,
            [],
            caveats=caveats(algorithm, source="none"),
            implausible=implausible(algorithm),
        )
    # Every path to a run's σ and headline ε comes through here (dpfl run, the worker, admission,
    # POST /api/privacy/project, sweeps, reproductions), so the accountant is checked once, here,
    # before it calibrates anything. Who releases what at which sampling rate does not depend on
    # σ, so a plan at the given σ (or 1) shows whether the accountant is exact for it.
    probe = algorithm.plan(privacy.noise_multiplier or 1.0).party_events()
    problem = headline_problem(privacy.accountant, probe.values())
    if problem is not None:
        raise SpecError("privacy.accountant", f"{problem}; got {privacy.accountant!r}.")
    key = stored = None
    own = storable(type(algorithm), accountant_class(privacy.accountant))
    if store is not None and source == "seeded" and own:
        # the spec as stored (`Algorithm.resolve`): admission's and its worker's keys agree
        key = projection_key(type(algorithm).resolve(spec).model_dump_json(), probe)
        stored = read_projection(store, key, rounds=spec.rounds, silos=spec.dataset.silos)
    sigma: float | np.ndarray
    if stored is None:
        sigma = _noise_multiplier(algorithm)
    else:
        sigma = np.asarray(stored[0]) if isinstance(stored[0], list) else stored[0]
        remember_orders(stored[2])  # the run's ledger is accounted afresh, from these values
    # What only σ shows is refused here, once it is known, so that every submission path refuses
    # it too (the worker's `setup` makes the same check for a σ given by hand).
    algorithm.check_noise(sigma)
    plan = algorithm.plan(sigma)
    _check_noise_floor(plan, privacy)
    if stored is None:
        by_round = dict(
            zip(
                plan.rounds,
                plan.epsilon_by_round(delta=privacy.delta, accountant=privacy.accountant),
                strict=True,
            )
        )
        planned, eps = [], 0.0
        for r in range(1, spec.rounds + 1):
            eps = float(by_round.get(r, eps))
            planned.append(eps)
    else:
        planned = stored[1]
    sigma_out = float(sigma) if np.ndim(sigma) == 0 else [float(s) for s in np.asarray(sigma)]
    bound = planned[-1] if planned else 0.0
    if source == "entropy" and spec.silos_per_round < spec.dataset.silos:
        bound = max(bound, _bound_over_draws(algorithm, sigma))
    if key is not None and stored is None:
        write_projection(store, key, sigma_out, planned, computed_orders(plan.party_events().values()))
    return Privacy(
        algorithm.notion,
        privacy.delta,
        privacy.accountant,
        privacy.calibration,
        sigma_out,
        privacy.epsilon,
        planned,
        target_mu=privacy.mu,
        caveats=caveats(algorithm, source=source),
        noise_source=source,
        neighbouring=algorithm.neighbouring,
        bound_epsilon=bound,
        implausible=implausible(algorithm),
    )


def _bound_over_draws(algorithm: Algorithm, sigma: float | np.ndarray) -> float:
    """Returns the ε of the plan in which every silo takes part in every round: at least the ε of
    any participation draw, which a protected run makes from its secret key."""
    privacy, key = algorithm.spec.privacy, algorithm.noise_key
    algorithm.noise_key = EVERY_SILO
    try:
        curve = algorithm.plan(sigma).epsilon_by_round(delta=privacy.delta, accountant=privacy.accountant)
    finally:
        algorithm.noise_key = key
    return float(curve[-1]) if len(curve) else 0.0


def _noise_multiplier(algorithm: Algorithm) -> float | np.ndarray:
    """Returns the run's σ: given, from μ, the paper's closed form, or calibrated to its ε target."""
    privacy = algorithm.spec.privacy
    if privacy.noise_multiplier is not None:
        if privacy.calibration == "paper":
            raise SpecError(
                "privacy.calibration", "`paper` calibrates from `epsilon`; remove `noise_multiplier`."
            )
        return privacy.noise_multiplier
    if privacy.mu is not None:  # the paper's closed form and the accountant agree for GDP releases
        return _gdp_noise_multiplier(algorithm, mu=privacy.mu)
    try:
        return _calibrated(algorithm)
    except SpecError as exc:
        if exc.field.startswith(("params.", "model.", "dataset.", "privacy.calibration")):
            raise
        # The calibration names its own arguments (`target_epsilon`, a σ it tried); the user
        # gave the target, so the refusal names the target's field, for the form to place.
        raise SpecError(privacy.target.field, exc.reason) from None


def _calibrated(algorithm: Algorithm) -> float | np.ndarray:
    """Returns the σ that meets the spec's ε target: the paper's closed form where asked, else the
    smallest σ the accountant finds (one per silo where each silo is accounted on its own)."""
    spec, privacy = algorithm.spec, algorithm.spec.privacy
    if privacy.calibration == "paper":
        paper = algorithm.paper_noise_multiplier(epsilon=privacy.epsilon, delta=privacy.delta)
        if paper is None:
            raise SpecError(
                "privacy.calibration", f"`paper` is not offered by {spec.algorithm}; use `accountant`."
            )
        return paper
    if algorithm.notion == "gdp" and privacy.accountant == "gdp":  # (ε, δ) → μ exactly, then closed form
        return _gdp_noise_multiplier(algorithm, mu=gdp_mu(epsilon=privacy.epsilon, delta=privacy.delta))
    if algorithm.party_of_silo is not None:  # each silo accounted on its own: its own smallest σ
        return calibrate_party_noise_multipliers(
            lambda s: algorithm.plan(s).party_events(),
            parties=[algorithm.party_of_silo(i) for i in range(spec.dataset.silos)],
            target_epsilon=privacy.epsilon,
            target_delta=privacy.delta,
            accountant=privacy.accountant,
        )
    return calibrate_noise_multiplier(
        lambda s: list(algorithm.plan(s).party_events().values()),
        target_epsilon=privacy.epsilon,
        target_delta=privacy.delta,
        accountant=privacy.accountant,
    )


def _check_noise_floor(plan: Ledger, privacy) -> None:
    """Refuses Gaussian releases below the σ the accountant evaluates in bounded time and memory,
    naming the field (other releases, e.g. an (ε, δ) pair, have no such floor)."""
    floor = accountant_class(privacy.accountant).min_noise_multiplier
    sigmas = [s for e in plan.party_events().values() for s in gaussian_noise_multipliers(e)]
    smallest = min(sigmas, default=math.inf)
    if floor is None or smallest >= floor:
        return
    raise SpecError(
        privacy.target.field,
        f"gives a noise multiplier of {smallest:g}; the {privacy.accountant} accountant evaluates "
        f"σ ≥ {floor:g} in bounded time and memory (its grid grows as 1/σ²); use σ ≥ {floor:g} "
        "or the rdp accountant.",
    )


def _gdp_noise_multiplier(algorithm: Algorithm, *, mu: float) -> float:
    """Returns the σ under which the least private party's releases compose to exactly μ.

    A `gdp` algorithm's releases are Gaussian, each (1/σ)-GDP, so a party's μ is √(releases)/σ:
    the plan under σ = 1 gives the scale (for GDP-LocalNewton σ = √(2T)/μ, the paper's closed
    form), and the check refuses a plan that does not scale that way.
    """
    unit = ledger_mu(algorithm.plan(1.0))
    sigma = unit / mu if unit > 0 else math.inf
    if not (math.isfinite(sigma) and math.isclose(ledger_mu(algorithm.plan(sigma)), mu, rel_tol=1e-9)):
        raise AccountingError(
            f"{algorithm.name}: its planned releases do not compose to a μ proportional to 1/σ, "
            f"so the target μ = {mu:g} cannot be met in closed form"
        )
    return sigma
