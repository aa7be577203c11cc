"""The empirical privacy auditor: is the ε on the chart true?

Two checks on one round's real releases, caught through the engine's release tap
(`dpfl.engine.release`):

- sensitivity fuzzing (`neighbours`, `fuzz`): run the algorithm's round on adversarial
  neighbouring datasets for its notion with the noise off, and compare how far each release
  moves with the sensitivity its noise was calibrated for (std used ÷ the ledger's σ);
- a statistical lower bound on ε (`trials`, `statistics`): many trials of the release on both
  neighbours, a threshold test, Clopper–Pearson intervals; a bound above the ledger's ε is a bug.
"""

from dpfl.audit.statistics import EpsilonBound, clopper_pearson, epsilon_lower_bound
from dpfl.audit.trials import projected_trials

__all__ = ["EpsilonBound", "clopper_pearson", "epsilon_lower_bound", "projected_trials"]
