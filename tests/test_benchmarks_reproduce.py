"""benchmarks/reproduce.py: the quick runs' claim verdicts, compared with the full sweeps' in the docs."""

from __future__ import annotations

from benchmarks.all import Child
from benchmarks.reproduce import claim_verdicts, compare_verdicts, full_verdicts, plan_here, render
from dpfl.reproduce import PAPERS, default_config_dir, load_paper

SECTION = """## Seed 004: Kato et al.

The paper's claims:

- **holds**: ULDP-AVG-w converges faster (Figs. 6, 8). We measure: uldp_avg_w ahead of uldp_avg by 0.02.
- **does not hold**: AE-DPFL beats DP-FedAvg (Table 3: 95.1% against 84.2%). We measure: behind by 11.
- **cannot be checked**: kNN is best. We measure: no finished run of knn_dpfl.
"""


def test_verdict_lines_are_read_back_with_their_claims():
    assert claim_verdicts(SECTION) == [
        ("ULDP-AVG-w converges faster (Figs. 6, 8)", "holds"),
        ("AE-DPFL beats DP-FedAvg (Table 3: 95.1% against 84.2%)", "does not hold"),
        ("kNN is best", "cannot be checked"),
    ]


def test_quick_verdicts_are_compared_claim_by_claim():
    full = [("A beats B", "holds"), ("C beats D", "does not hold")]
    assert compare_verdicts([("A beats B", "holds"), ("C beats D", "does not hold")], full) == (
        "2 of 2 as in the full sweep"
    )
    assert compare_verdicts([("A beats B", "does not hold"), ("C beats D", "does not hold")], full) == (
        "1 of 2 as in the full sweep (differs: “A beats B…”: quick does not hold, full holds)"
    )
    assert compare_verdicts([], full) == "no claim checked"
    assert compare_verdicts([("A beats B", "holds")], []) == (
        "1 checked; no full sweep in docs/reproduction.md to compare"
    )


def test_the_docs_hold_a_verdict_for_every_claim_of_every_paper():
    for paper in PAPERS:
        claims = {c.text for s in load_paper(paper, default_config_dir()) for c in s.block.claims}
        verdicts = full_verdicts(paper)
        assert {claim for claim, _ in verdicts} == claims, paper
        assert all(v in ("holds", "does not hold", "cannot be checked") for _, v in verdicts)


def test_the_plan_and_table_name_a_config_left_out_of_quick():
    plan = plan_here()["voting"]
    assert plan["left_out"] == ["voting_digits", "voting_mnist_six_digits_cnn"]
    assert "voting_mnist_six_digits_cnn" not in plan["settings"] and len(plan["settings"]) == 3
    body, ok = render({"voting": plan}, {"voting": Child(0, 42.0, 800.0, "")})
    row = next(line for line in body.splitlines() if line.startswith("| voting |"))
    assert row.endswith(
        "| `voting_digits.yaml` left out of --quick (its `skip`); "
        "`voting_mnist_six_digits_cnn.yaml` left out of --quick (its `skip`) |"
    )
    assert "42 s (0.7 min)" in row and ok
