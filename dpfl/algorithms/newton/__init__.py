"""Second-order private FL of Cao, Guo & Zhang (seed 001; reference/001_gdp_localnewton.md).

μ-GDP, record-level: each client's noisy releases are Gaussian mechanisms on its own records,
composed as √Σμ² per client and as the maximum across clients (disjoint data). The model is
binary ℓ2-regularised logistic regression, on which each record's gradient and Hessian have
the bounds the noise is calibrated to (`objective`).

Modules: `objective` (batched loss, gradient, Hessian), `mechanism` (noise, eigenvalue floor,
batched solve), `steps` (fixed, decaying, line search), `core` (the shared round), and one
module per algorithm: `localnewton` (non-private), `gdp_localnewton`, `gdp_gd`.
"""

from dpfl.algorithms.newton.gdp_gd import GDPGD
from dpfl.algorithms.newton.gdp_localnewton import LINE_SEARCH_CAVEAT, GDPLocalNewton
from dpfl.algorithms.newton.localnewton import LocalNewton

__all__ = ["GDPGD", "LINE_SEARCH_CAVEAT", "GDPLocalNewton", "LocalNewton"]
