"""Root finding for calibration: the root of a non-increasing f, bracketed to a relative tolerance.

Calibration wants the smallest σ whose ε meets a target. On x = log σ the function
f(x) = log ε(eˣ) − log ε_target is non-increasing and close to a straight line of slope −1
(ε ∝ 1/σ for a Gaussian release), and every evaluation costs an accountant run. This module
finds its root in few evaluations; it knows nothing of privacy.

Guarantee: a search ends with a `Bracket` of two evaluated points lo < hi with
f(lo) > 0 ≥ f(hi) and hi − lo ≤ tol = log(1 + rtol), so e^hi / e^lo ≤ 1 + rtol. If the
search would leave [x_min, x_max] before it brackets the root, it ends there instead, with
lo = None (f ≤ 0 down to the lowest point tried) or hi = None (f > 0 up to the highest).

Steps:

1. The first step comes from a model of f near its root (`Shape`: a parabola fitted to an
   earlier, similar search, or slope −1) and aims tol/2 past the predicted root, so that an
   accurate model brackets the root with one evaluation.
2. Secant steps (the chord through the last two points) until the root is bracketed. A
   step moves x by at least tol and at most log 4; at f = ±∞ only the direction is known
   and the step is log 4.
3. Regula falsi with the Anderson–Björck rule: an endpoint kept twice in a row has its
   weight scaled down, so that the interpolation does not creep up on the root from one
   side. Every point is kept at least tol/2 inside the bracket, so once the interpolation
   is accurate the next point lands just across the root and the bracket closes.
4. A bisection after four steps that fail to halve the bracket.

From a cold start a search takes about 6 evaluations (plain bisection took about 17); one
warm-started from a similar search's `Shape`, 3–4.

`RootSearch` asks for one point at a time (`x`) and is told f there (`tell`), so that several
searches can share one evaluation (calibration evaluates every party's schedule in one plan);
`find_root` drives a single search with a function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Bracket", "RootSearch", "Shape", "find_root"]

MAX_STEP = math.log(4.0)  # a bracketing step moves eˣ by at most ×4
MIN_SPREAD = 0.005  # points closer than this in x are too close to tell a curvature from noise


@dataclass(frozen=True)
class Shape:
    """A model of f near its root: f(root + Δ) ≈ slope·Δ + curvature·Δ²/2.

    The default, slope −1 and no curvature, is a Gaussian release's ε ∝ 1/σ; a search returns
    the shape fitted to its own points, a warm start for the search of a similar function.
    """

    slope: float = -1.0
    curvature: float = 0.0

    def step(self, fx: float) -> float:
        """Returns the Δ that takes f from fx to 0 under this model (the root nearer to 0)."""
        disc = self.slope**2 - 2 * self.curvature * fx
        if self.curvature == 0 or disc < 0:
            return -fx / self.slope
        return -2 * fx / (self.slope - math.sqrt(disc))

    @classmethod
    def fit(cls, points: Sequence[tuple[float, float]], root: float, prior: Shape) -> Shape:
        """Returns the parabola's slope and curvature at `root` through up to three spread-out points.

        The points nearest the root are used, skipping infinite values and points within
        MIN_SPREAD of one already chosen; `prior` is kept when fewer than two remain or the
        fitted slope is not negative.
        """
        chosen: list[tuple[float, float]] = []
        for x, fx in sorted(points, key=lambda p: abs(p[0] - root)):
            if math.isfinite(fx) and all(abs(x - c[0]) >= MIN_SPREAD for c in chosen):
                chosen.append((x, fx))
            if len(chosen) == 3:
                break
        if len(chosen) < 2:
            return prior
        (xa, fa), (xb, fb) = chosen[:2]
        d1 = (fb - fa) / (xb - xa)
        d2 = 0.0
        if len(chosen) == 3:
            xc, fc = chosen[2]
            d2 = ((fc - fb) / (xc - xb) - d1) / (xc - xa)
        slope = d1 + d2 * (2 * root - xa - xb)
        return cls(slope, 2 * d2) if slope < 0 else prior


@dataclass(frozen=True)
class Bracket:
    """The end of a search: evaluated points lo < hi with f(lo) > 0 ≥ f(hi), hi − lo ≤ log(1 + rtol).

    lo is None when the search stopped at x_min with f ≤ 0 at every point tried (hi is then
    the lowest of them); hi is None when it stopped at x_max with f > 0 at every point tried.
    `shape` is fitted to the search's points when it bracketed the root, else its prior.
    """

    lo: float | None
    hi: float | None
    shape: Shape


class RootSearch:
    """One search for the root of a non-increasing f, one point at a time.

    Read `x`, the next point f is needed at, and answer with `tell(f(x))`; when `x` is None
    the search is over and `result` holds its bracket. f may be ±∞ (the search then only
    steps in the direction it gives).
    """

    def __init__(
        self,
        x0: float,
        *,
        f0: float | None = None,
        shape: Shape | None = None,
        rtol: float = 1e-4,
        x_min: float = -math.inf,
        x_max: float = math.inf,
    ) -> None:
        """Starts at x0 (f0 = f(x0) if known already), stepping first by `shape` (default slope −1)."""
        self.tol = math.log1p(rtol)
        self.x_min, self.x_max = x_min, x_max
        self.prior = Shape() if shape is None else shape
        self.result: Bracket | None = None
        self._seen: list[tuple[float, float]] = []  # every (x, f(x)), in the order evaluated
        self._lo: tuple[float, float] | None = None  # the largest x with f > 0: too little noise
        self._hi: tuple[float, float] | None = None  # the smallest x with f ≤ 0: meets the target
        self._falsi: _RegulaFalsi | None = None  # set once the root is bracketed
        self.x: float | None = x0
        if f0 is not None:
            self.tell(f0)

    def tell(self, fx: float) -> None:
        """Takes f at `x`; sets the next point to evaluate, or `result` (and x = None) when done."""
        if self.x is None:
            raise RuntimeError("the search is over")
        x = self.x
        self._seen.append((x, fx))
        if self._falsi is None:
            self._keep(x, fx)
            if self._lo is None or self._hi is None:
                self.x = self._bracketing_step()
                return
            self._falsi = _RegulaFalsi(self._lo, self._hi)
        else:
            self._falsi.update(x, fx)
        self.x = self._falsi.point(self.tol)
        if self.x is None:
            xh = self._falsi.xh
            self.result = Bracket(self._falsi.xl, xh, Shape.fit(self._seen, xh, self.prior))

    def _keep(self, x: float, fx: float) -> None:
        """Narrows the bracket found so far with a new point."""
        if fx > 0:
            if self._lo is None or x > self._lo[0]:
                self._lo = (x, fx)
        elif self._hi is None or x < self._hi[0]:
            self._hi = (x, fx)

    def _bracketing_step(self) -> float | None:
        """Returns the next point before the root is bracketed, or None (and sets `result`) out of range."""
        x, fx = self._seen[-1]
        if math.isinf(fx):  # f = +∞ or −∞: only the direction is known
            step = math.copysign(MAX_STEP, fx)
        else:  # aim just past the predicted root: an accurate prediction brackets it at once
            step = self._model().step(fx) + math.copysign(self.tol / 2, fx)
        step = min(max(step, self.tol), MAX_STEP) if fx > 0 else max(min(step, -self.tol), -MAX_STEP)
        x_new = x + step
        if x_new > self.x_max:  # f > 0 here, so lo is set
            self.result = Bracket(self._lo[0], None, self.prior)  # type: ignore[index]
            return None
        if x_new < self.x_min:  # f ≤ 0 here, so hi is set
            self.result = Bracket(None, self._hi[0], self.prior)  # type: ignore[index]
            return None
        return x_new

    def _model(self) -> Shape:
        """Returns the secant through the last two points where it falls, else the prior shape."""
        if len(self._seen) > 1:
            (xa, fa), (xb, fb) = self._seen[-2:]
            if math.isfinite(fa) and math.isfinite(fb) and fb != fa:
                chord = (fb - fa) / (xb - xa)
                if chord < 0:
                    return Shape(chord)
        return self.prior


def find_root(
    f: Callable[[float], float],
    x0: float,
    *,
    f0: float | None = None,
    shape: Shape | None = None,
    rtol: float = 1e-4,
    x_min: float = -math.inf,
    x_max: float = math.inf,
) -> Bracket:
    """Returns the bracket of the root of a non-increasing f, searched from x0 (see the module docstring).

    Args:
        f: the function; ±∞ allowed.
        x0: where to start; f0: f(x0), if already known (saves one evaluation).
        shape: a model of f near its root (a similar search's `Bracket.shape`); default slope −1.
        rtol: the bracket's width is at most log(1 + rtol).
        x_min, x_max: the search stops rather than step outside [x_min, x_max].
    """
    search = RootSearch(x0, f0=f0, shape=shape, rtol=rtol, x_min=x_min, x_max=x_max)
    while search.x is not None:
        search.tell(f(search.x))
    assert search.result is not None
    return search.result


class _RegulaFalsi:
    """Regula falsi on a bracket (lo, hi), with the Anderson–Björck rule and a bisection fallback."""

    def __init__(self, lo: tuple[float, float], hi: tuple[float, float]) -> None:
        (self.xl, self.fl), (self.xh, self.fh) = lo, hi
        self.wl, self.wh = self.fl, self.fh  # interpolation weights; an endpoint kept twice shrinks
        self.kept = ""  # the endpoint the last step kept, "l" or "h"
        self.widths = [self.xh - self.xl]

    def point(self, tol: float) -> float | None:
        """Returns the next point, at least tol/2 inside the bracket; None once the bracket is ≤ tol wide."""
        xl, xh, wl, wh = self.xl, self.xh, self.wl, self.wh
        if not xh - xl > tol:
            return None
        if len(self.widths) >= 5 and self.widths[-1] > self.widths[-5] / 2:
            x = (xl + xh) / 2  # four steps without halving the bracket: bisect
        elif math.isfinite(wl) and math.isfinite(wh) and wl != wh:
            x = xl + wl * (xh - xl) / (wl - wh)
        else:
            x = (xl + xh) / 2
        return min(max(x, xl + tol / 2), xh - tol / 2)

    def update(self, x: float, fx: float) -> None:
        """Replaces the endpoint on f(x)'s side by x."""
        if fx > 0:
            if self.kept == "h":
                self.wh *= _shrink(fx, self.fl)
            self.xl, self.fl, self.wl, self.kept = x, fx, fx, "h"
        else:
            if self.kept == "l":
                self.wl *= _shrink(fx, self.fh)
            self.xh, self.fh, self.wh, self.kept = x, fx, fx, "l"
        self.widths.append(self.xh - self.xl)


def _shrink(f_new: float, f_old: float) -> float:
    """Returns the Anderson–Björck factor 1 − f_new/f_old, or 1/2 where that is not in (0, 1)."""
    m = 1 - f_new / f_old if f_old != 0 and math.isfinite(f_old) and math.isfinite(f_new) else 0.0
    return m if 0 < m < 1 else 0.5
