"""Plotly figures of runs and sweeps, built once here for the API and the offline report.

Each figure function takes plain data (lists of dicts, numbers) and returns a
``plotly.graph_objects.Figure``. The API sends ``to_json(fig)`` and the browser draws it with
``Plotly.react``; ``dpfl reproduce`` embeds the same figures in its HTML report, so the two never
disagree. Nothing here fetches, reads a database or knows a URL.

Modules: ``colours`` (one colour per algorithm), ``layout`` (what every figure shares),
``tradeoff`` (accuracy against ε across a sweep), ``runs`` (per-run curves), ``parties``
(ε per party, labels per silo, users across silos).
"""

from dpfl.plots.colours import NEUTRAL_COLOUR, algorithm_colour
from dpfl.plots.layout import to_json
from dpfl.plots.parties import epsilon_per_party, label_histogram, user_distribution
from dpfl.plots.runs import accuracy_vs_spent, learning_curves
from dpfl.plots.tradeoff import tradeoff

__all__ = [
    "NEUTRAL_COLOUR",
    "accuracy_vs_spent",
    "algorithm_colour",
    "epsilon_per_party",
    "label_histogram",
    "learning_curves",
    "to_json",
    "tradeoff",
    "user_distribution",
]
