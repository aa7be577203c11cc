"""The vectorised RDP → ε conversion equals dp_accounting's scalar one."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

from dpfl.privacy.accountants import DEFAULT_ORDERS
from dpfl.privacy.conversion import rdp_to_epsilon


@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_matches_dp_accounting_on_random_curves(delta):
    rng = np.random.default_rng(0)
    orders = np.asarray(DEFAULT_ORDERS)
    curves = rng.uniform(0, 3, size=(50, 1)) * orders[None, :] * rng.uniform(0.01, 1, size=(50, 1))
    curves[0] = 1e-13  # the KL bound gives ε = 0 here at δ = 1e-3 and 1e-5
    curves[1, :5] = np.inf
    ours = rdp_to_epsilon(orders, curves, delta=delta)
    theirs = [compute_epsilon(orders, c, delta)[0] for c in curves]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
    assert (ours[0] == 0) == (delta > 1e-6)


def test_classic_conversion_is_mironovs():
    orders = np.array([2.0, 5.0, 11.0])
    rdp = np.array([0.1, 0.5, 2.0])
    expected = min(rdp + np.log(1e5) / (orders - 1))
    assert rdp_to_epsilon(orders, rdp, delta=1e-5, conversion="classic") == pytest.approx(expected)


def test_unknown_conversion_is_refused():
    with pytest.raises(ValueError, match=r"`conversion` must be one of tight, classic; got 'exact'\."):
        rdp_to_epsilon(np.array([2.0]), np.array([1.0]), delta=1e-5, conversion="exact")
