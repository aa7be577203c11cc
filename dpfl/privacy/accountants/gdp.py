"""Gaussian DP in closed form (Dong, Roth & Su 2022): μ composes as √Σμᵢ².

Conversion to (ε, δ) is exact (Cor. 2.13; reference/001_gdp_localnewton.md §1.4):
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
A Poisson-sub-sampled Gaussian is not μ-GDP for any useful μ; the central limit theorem of
Bu et al. (2020) treats T steps at rate q as μ = q·√(T(e^{1/σ²} − 1))-GDP. That is an
approximation that can underestimate ε (small T, large q), so the accountant marks itself
approximate when it uses it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpfl.errors import AccountingError
from dpfl.formats import number_text
from dpfl.privacy.accountants.base import ACCOUNTANTS, Accountant, Unsupported
from dpfl.privacy.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    GDPEvent,
    GroupEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    VoteEvent,
)

__all__ = ["GDPAccountant", "gdp_delta", "gdp_epsilon", "gdp_mu"]

_CLT_NOTE = (
    "Poisson-sampled Gaussian accounted by the GDP central limit theorem (approximate; can underestimate ε)"
)


def _log_delta(eps: np.ndarray, mu: np.ndarray) -> np.ndarray:
    # log δ(ε) in log space so that large ε/μ do not underflow to 0 - 0.
    a = special.log_ndtr(-eps / mu + mu / 2)
    b = eps + special.log_ndtr(-eps / mu - mu / 2)
    with np.errstate(divide="ignore"):
        return a + np.log1p(-np.exp(np.minimum(b - a, 0.0)))


def gdp_delta(*, mu: float, epsilon: float) -> float:
    """Returns the δ at which μ-GDP gives ε (exact; Dong, Roth & Su 2022, Cor. 2.13)."""
    return float(np.exp(_log_delta(np.asarray(float(epsilon)), np.asarray(float(mu)))))


def gdp_epsilon(mu, *, delta: float) -> np.ndarray | float:
    """Returns the smallest ε with δ(ε) ≤ δ for μ-GDP; vectorised over `mu` (bisection, 1e-10 rel)."""
    mu_arr = np.atleast_1d(np.asarray(mu, dtype=float))
    log_target = math.log(delta)
    lo = np.zeros_like(mu_arr)
    hi = np.maximum(mu_arr * mu_arr / 2 + mu_arr * math.sqrt(2 * max(-log_target, 1.0)) + 1.0, 1.0)
    while np.any(grow := _log_delta(hi, mu_arr) > log_target):
        hi = np.where(grow, hi * 2, hi)
    done = _log_delta(lo, mu_arr) <= log_target  # δ(0) already below target: ε = 0
    for _ in range(200):
        mid = (lo + hi) / 2
        above = _log_delta(mid, mu_arr) > log_target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
        if np.all(hi - lo <= 1e-10 * np.maximum(hi, 1e-12)):
            break
    eps = np.where(done, 0.0, hi)
    return float(eps[0]) if np.ndim(mu) == 0 else eps


def gdp_mu(*, epsilon: float, delta: float) -> float:
    """Returns the largest μ whose μ-GDP guarantee gives (ε, δ)-DP (root of δ(ε; μ) = δ)."""

    def gap(log_mu: float) -> float:
        return float(_log_delta(np.asarray(epsilon), np.asarray(math.exp(log_mu)))) - math.log(delta)

    from scipy import optimize  # ~0.3 s to import; only this conversion needs it

    return math.exp(optimize.brentq(gap, math.log(1e-6), math.log(1e4), xtol=1e-14, rtol=1e-12))


@ACCOUNTANTS.register("gdp")
class GDPAccountant(Accountant):
    """μ-GDP: Gaussian, GDP and vote events exactly; Poisson-sampled Gaussians by the CLT."""

    description = "Gaussian DP in closed form (√Σμ²); CLT for Poisson-sampled Gaussians (approximate)"
    approximates = True

    def __init__(self) -> None:
        super().__init__()
        self.mu_squared = 0.0

    def _mu_squared(self, event: Event) -> float:
        if isinstance(event, (GaussianEvent, VoteEvent)):
            return 1.0 / event.noise_multiplier**2
        if isinstance(event, GDPEvent):
            return event.mu**2
        if isinstance(event, SelfComposedEvent):
            return event.count * self._mu_squared(event.event)
        if isinstance(event, ComposedEvent):
            return sum(self._mu_squared(e) for e in event.events)
        if isinstance(event, GroupEvent):  # μ-GDP ⇒ kμ-GDP for groups of k (Dong et al. 2022)
            return event.group_size**2 * self._mu_squared(event.event)
        if isinstance(event, PoissonSampledEvent):
            if not isinstance(event.event, GaussianEvent):
                raise Unsupported(event, "the GDP CLT covers only Poisson-sampled Gaussian events")
            if event.sampling_rate == 1:
                return self._mu_squared(event.event)
            sigma = event.event.noise_multiplier
            return event.sampling_rate**2 * math.expm1(1.0 / sigma**2)
        raise Unsupported(event, "not a Gaussian-type release; GDP has no closed form for it")

    def _check(self, event: Event) -> None:
        self._mu_squared(event)

    def approximation(self, event: Event) -> str | None:
        """Returns the CLT note if `event` holds a Poisson-sampled Gaussian at q < 1, else None."""
        return _CLT_NOTE if _uses_clt(event) else None

    def _compose(self, event: Event, count: int) -> None:
        self.mu_squared += count * self._mu_squared(event)
        if _uses_clt(event):
            self._note(_CLT_NOTE, approximate=True)

    @property
    def mu(self) -> float:
        """Returns the composed μ = √Σμᵢ²."""
        return math.sqrt(self.mu_squared)

    def epsilon(self, delta: float) -> float:
        """Returns the exact ε at δ of the composed μ-GDP guarantee."""
        if self.mu_squared == 0:
            return 0.0
        eps = float(gdp_epsilon(self.mu, delta=delta))
        if not math.isfinite(eps):
            raise AccountingError(f"gdp: no finite ε for μ={self.mu:g} at δ = {number_text(delta)}")
        return eps

    def epsilon_curve(self, events, counts: np.ndarray, *, delta: float) -> np.ndarray:
        """Returns cumulative ε per round from the cumulative μ², converted in one vectorised call."""
        self._require(events)
        per_round = counts @ np.array([self._mu_squared(e) for e in events], dtype=float).reshape(len(events))
        if any(_uses_clt(e) for e in events):
            self._note(_CLT_NOTE, approximate=True)
        cumulative = self.mu_squared + np.cumsum(per_round)
        if len(counts):
            self.mu_squared = float(cumulative[-1])
        out = np.zeros(len(counts))
        positive = cumulative > 0
        if np.any(positive):
            out[positive] = gdp_epsilon(np.sqrt(cumulative[positive]), delta=delta)
        return out


def _uses_clt(event: Event) -> bool:
    if isinstance(event, PoissonSampledEvent):
        return event.sampling_rate < 1
    if isinstance(event, (SelfComposedEvent, GroupEvent)):
        return _uses_clt(event.event)
    if isinstance(event, ComposedEvent):
        return any(_uses_clt(e) for e in event.events)
    return False
