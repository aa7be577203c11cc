"""Plotly figures of runs and sweeps, built once here for the API and the offline report.

Each figure function takes plain data (lists of dicts, numbers) and returns a
``plotly.graph_objects.Figure``. The API sends ``to_json(fig)`` and the browser draws it with
``Plotly.react``; ``dpfl reproduce`` embeds the same figures in its HTML report, so the two never
disagree. Nothing here fetches, reads a database or knows a URL.

Modules: ``colours`` (one colour per algorithm), ``layout`` (what every figure shares),
``tradeoff`` (accuracy against ε across sweeps and runs), ``notions`` (one panel per privacy
notion, the notion on every ε axis, the subtitle), ``baseline`` (the majority-class rate and
"no better than guessing"), ``runs`` (per-run curves), ``parties`` (ε per party, labels per
silo, users across silos), ``hyperparams`` (a sweep's parallel coordinates and hyperparameter
importance).
"""

from dpfl.plots.baseline import (
    GUESSING_MARGIN,
    chance_baseline,
    guessing_margin,
    majority_accuracy,
    no_better_than_guessing,
    run_baseline,
)
from dpfl.plots.colours import NEUTRAL_COLOUR, algorithm_colour
from dpfl.plots.hyperparams import (
    NOT_HYPERPARAMETERS,
    flatten,
    importance,
    importance_bars,
    outcome_title,
    parallel_coordinates,
)
from dpfl.plots.layout import to_json
from dpfl.plots.notions import compare_subtitle
from dpfl.plots.parties import epsilon_per_party, label_histogram, user_distribution
from dpfl.plots.runs import PER_ROUND_METRICS, accuracy_vs_spent, learning_curves, metric_per_round, smoothed
from dpfl.plots.tradeoff import BANDS, Band, band_limits, tradeoff

__all__ = [
    "BANDS",
    "GUESSING_MARGIN",
    "NEUTRAL_COLOUR",
    "NOT_HYPERPARAMETERS",
    "PER_ROUND_METRICS",
    "Band",
    "accuracy_vs_spent",
    "algorithm_colour",
    "band_limits",
    "chance_baseline",
    "compare_subtitle",
    "epsilon_per_party",
    "flatten",
    "guessing_margin",
    "importance",
    "importance_bars",
    "label_histogram",
    "learning_curves",
    "majority_accuracy",
    "metric_per_round",
    "no_better_than_guessing",
    "outcome_title",
    "parallel_coordinates",
    "run_baseline",
    "smoothed",
    "to_json",
    "tradeoff",
    "user_distribution",
]
