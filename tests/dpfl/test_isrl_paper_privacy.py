"""The ISRL-DP paper's closed-form σ accounted in the paper's own setting (n = 1238, q²R ≈ 6)."""

import math

import pytest
from dp_accounting import NeighboringRelation
from dp_accounting.pld import privacy_loss_distribution

from dpfl.reproduce import isrl_paper_privacy as paper


def test_the_papers_batch_keeps_q_squared_r_near_six():
    assert (paper.batch_size(25), paper.batch_size(50)) == (606, 428)
    q = 428 / 1238
    assert q * q * 50 == pytest.approx(5.98, abs=0.01)
    # σ = q·√(8R ln(2/δ))/ε with δ = 1/1238²
    assert paper.noise_multiplier(6.0, 50) == pytest.approx(q * math.sqrt(400 * math.log(2 * 1238**2)) / 6)


def test_add_remove_never_exceeds_the_stated_epsilon_and_replace_one_does_from_twelve():
    rows = {(r.method, r.relation): r for r in paper.rows(50, stated=(0.75, 6.0, 12.0, 18.0))}
    mbsgd = rows["ISRL-DP MB-SGD", "add/remove"]
    assert (mbsgd.releases, mbsgd.accountant) == (50, "rdp")
    assert mbsgd.spent == pytest.approx((0.297, 2.899, 6.781, 11.804), rel=2e-3)
    replace = rows["ISRL-DP MB-SGD", "replace-one"]
    assert replace.spent == pytest.approx((0.570, 5.503, 12.245, 19.85), rel=2e-3)
    assert [s > e for s, e in zip(replace.spent, (0.75, 6, 12, 18), strict=True)] == [
        False,
        False,
        True,
        True,
    ]
    # Alg. 11 sends 2R − 1 messages on a σ calibrated for R: above the stated ε under replace-one
    # at every ε, and not under add/remove
    alg11 = rows["Fed-SPIDER, Alg. 11", "replace-one"]
    assert alg11.releases == 99 and all(s > e for s, e in zip(alg11.spent, (0.75, 6, 12, 18), strict=True))
    assert all(
        s < e for s, e in zip(rows["Fed-SPIDER, Alg. 11", "add/remove"].spent, (0.75, 6, 12, 18), strict=True)
    )


def test_replace_one_without_sampling_is_add_remove_at_twice_the_sensitivity():
    """The pair the replace-one column rests on: records at ±C, i.e. a shift of 2C when q = 1."""
    replaced = paper._replace_one(1.0, 3.0, 10, 1e-6)
    doubled = privacy_loss_distribution.from_gaussian_mechanism(
        3.0, sensitivity=2.0, neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    assert replaced == pytest.approx(doubled.self_compose(10).get_epsilon_for_delta(1e-6), rel=1e-3)


def test_the_markdown_marks_what_exceeds_its_stated_epsilon():
    table = paper.markdown([paper.Row("m", 50, 50, "replace-one", "pld", (5.5, 12.2))], stated=(6.0, 12.0))
    assert table.splitlines()[-1] == "| m | 50 | 50 | replace-one | pld | 5.5 | **12.2** |"
