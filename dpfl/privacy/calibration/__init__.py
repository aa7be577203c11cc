"""Calibration: the smallest noise multiplier that meets a target (ε, δ), and the inverse.

Calibration searches σ on the accountant itself, for the exact schedule of releases the
caller describes (`make_events(σ)` returns each party's composed events). Two questions:

- `calibrate_noise_multiplier`: one σ for every party, the one the least private party needs.
- `calibrate_party_noise_multipliers`: each party its own σ, the smallest that makes its own
  ledger meet the target. This is right where each party is accounted on its own and its
  releases depend on its own σ only (ISRL-DP silos: a silo with more records samples at a
  lower rate and needs less noise). Parties with identical schedules (events are frozen
  dataclasses, equal by value) are calibrated once.

Guarantee, per party: the result meets the target and σ·(1 − 1e-3) does not. A search on the
whole accountant ends with a bracket lo < hi of evaluated points, ε(hi) ≤ target < ε(lo) and
hi/lo < 1 + rtol (rtol = 1e-4), and returns hi; ε is non-increasing in σ. Per-party searches
after the first, under the rdp accountant, bracket the ε of one RDP order (an upper bound on
the whole grid's) and then check the whole grid at hi/(1 + max(rtol, 1e-3)) instead
(`parties._PartySearch._in_lockstep`): within the guarantee, at a quarter of the cost.

The search itself is `dpfl.privacy.rootfind`'s, on f(x) = log ε(eˣ) − log ε_target with
x = log σ (`target.Target.gap`), between σ = 1e-3 (or the accountant's floor) and 1e5. f is close
to a straight line, and evaluations are what cost: each new (q, σ) needs a fresh RDP curve,
0.05–0.5 s at every tracked order, about 1 ms under the rdp accountant for Gaussian releases,
where `pruned_epsilon` computes only the orders that can hold the minimum (starting near the
last one's) and gives the same ε. A search from a cold start takes about 6 evaluations; one
warm-started from a similar party's search 3–4.

Under the rdp accountant the search first runs on the grid's integer orders alone (exact in
dp-accounting, and cheap): ε there bounds the whole grid's from above, so its σ meets the
target and lies a few per cent above the answer, where the whole grid's search starts.

Results are remembered in this process by schedule and target (`remembered`): a sweep's seeds
and a worker's later runs calibrate the same schedules again.

Modules: `one` and `parties` (the two calibrations), `target` (what both search against),
`walk` (group privacy's search on few orders), `remembered` (the results cache) and
`accounting` (ε of events, DP-SGD's schedule).
"""

from dpfl.privacy.calibration.accounting import NoiseOutOfRange, epsilon, sgd_event
from dpfl.privacy.calibration.one import calibrate_noise_multiplier
from dpfl.privacy.calibration.parties import calibrate_party_noise_multipliers

__all__ = [
    "NoiseOutOfRange",
    "calibrate_noise_multiplier",
    "calibrate_party_noise_multipliers",
    "epsilon",
    "sgd_event",
]
