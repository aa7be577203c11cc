"""Root finding: every search ends with a bracket of evaluated points that is at most log(1 + rtol) wide."""

from __future__ import annotations

import math

import pytest

from dpfl.privacy.rootfind import RootSearch, Shape, find_root


def _counted(f):
    """Returns f recording every point it is evaluated at, and that list."""
    points: list[float] = []

    def g(x: float) -> float:
        points.append(x)
        return f(x)

    return g, points


def _assert_bracket(f, bracket, points, rtol: float) -> None:
    assert bracket.lo in points and bracket.hi in points  # both ends were evaluated
    assert bracket.lo < bracket.hi
    assert bracket.hi - bracket.lo <= math.log1p(rtol)
    assert f(bracket.hi) <= 0 < f(bracket.lo)


@pytest.mark.parametrize(("a", "b"), [(0.0, 1.0), (3.0, 1.0), (-2.0, 0.5), (1.0, 7.0), (0.3, 0.02)])
@pytest.mark.parametrize("rtol", [1e-4, 1e-2])
def test_a_line_is_bracketed_to_rtol(a, b, rtol):
    def f(x):
        return a - b * x

    g, points = _counted(f)
    bracket = find_root(g, 0.0, rtol=rtol)
    _assert_bracket(f, bracket, points, rtol)
    assert bracket.lo <= a / b + 1e-12 and a / b - 1e-12 <= bracket.hi  # a / b is rounded


@pytest.mark.parametrize(
    "f",
    [
        lambda x: math.exp(-2 * x) - 0.5,  # convex
        lambda x: -(x**3) - x - 4,  # concave for x > 0, convex below
        lambda x: 1.0 if x < 0.3 else -1.0,  # a step: no slope to interpolate on
        lambda x: math.tanh(80 * (0.3 - x)),  # nearly a step
        lambda x: math.inf if x < -1 else -0.2 - x,  # +∞ where σ is refused, root at the edge
        lambda x: math.inf if x < 1.2 else (-math.inf if x > 1.25 else 1.22 - x),
    ],
    ids=["convex", "cubic", "step", "tanh", "inf-below", "inf-both"],
)
def test_monotone_functions_are_bracketed(f):
    g, points = _counted(f)
    bracket = find_root(g, 0.0)
    _assert_bracket(f, bracket, points, 1e-4)
    assert len(points) < 60


def test_a_near_linear_function_takes_few_evaluations_cold_and_fewer_warm():
    def near_linear(root):
        return lambda x: -1.02 * (x - root) + 0.03 * (x - root) ** 2

    for root in (0.7, -1.3, 2.5):
        g, cold = _counted(near_linear(root))
        first = find_root(g, 0.0)
        assert len(cold) <= 6
        # a similar function (root moved by 5 %), from the first root and with the fitted shape
        g, warm = _counted(near_linear(root + 0.05))
        second = find_root(g, first.hi, shape=first.shape)
        assert len(warm) <= 4
        assert second.lo <= root + 0.05 <= second.hi
    assert first.shape.slope == pytest.approx(-1.02, rel=1e-3)
    assert first.shape.curvature == pytest.approx(0.06, rel=1e-3)


def test_a_known_first_value_saves_its_evaluation():
    def f(x):
        return 0.4 - 1.1 * x

    g, points = _counted(f)
    without = find_root(g, 0.0)
    g, points_f0 = _counted(f)
    with_f0 = find_root(g, 0.0, f0=f(0.0))
    assert points_f0 == points[1:]
    assert with_f0 == without


def test_ask_and_tell_visits_the_same_points_as_find_root():
    def f(x):
        return math.exp(-x) - 1.7

    g, points = _counted(f)
    bracket = find_root(g, 0.5, rtol=1e-3)
    search, asked = RootSearch(0.5, rtol=1e-3), []
    while search.x is not None:
        asked.append(search.x)
        search.tell(f(search.x))
    assert asked == points
    assert search.result == bracket
    with pytest.raises(RuntimeError):
        search.tell(0.0)


def test_leaving_the_range_ends_the_search_without_a_side():
    # f > 0 up to x_max: no root in range
    above = find_root(lambda x: 5.0 - 0.01 * x, 0.0, x_max=3.0)
    assert above.hi is None and above.lo is not None and above.lo <= 3.0
    # f ≤ 0 down to x_min: hi is the lowest point tried, still within range
    g, points = _counted(lambda x: -3.0 - x)  # the root, −3, lies below x_min
    below = find_root(g, 0.0, x_min=-2.0)
    assert below.lo is None and below.hi == min(points) >= -2.0
    assert below.shape == Shape()  # nothing bracketed: the prior is kept


def test_shape_steps_to_its_root_and_is_fitted_to_a_parabola():
    assert Shape().step(0.3) == pytest.approx(0.3)  # slope −1
    parabola = Shape(slope=-2.0, curvature=0.5)
    d = parabola.step(0.7)
    assert -2.0 * d + 0.5 * d**2 / 2 == pytest.approx(-0.7)  # f(root + Δ) = −fx: it takes fx to 0
    points = [(x, -2.0 * x + 0.25 * x**2) for x in (-0.2, 0.1, 0.3)]
    fitted = Shape.fit(points, 0.0, prior=Shape())
    assert fitted.slope == pytest.approx(-2.0) and fitted.curvature == pytest.approx(0.5)
    # too few spread-out points, or a slope that does not fall: the prior stays
    assert Shape.fit([(0.0, 1.0), (0.001, 0.9)], 0.0, prior=parabola) is parabola
    assert Shape.fit([(0.0, 1.0), (0.5, 2.0)], 0.0, prior=parabola) is parabola
