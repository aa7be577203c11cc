import numpy as np
import pytest
import torch

from dpfl.engine import gaussian_noise, release, release_noise, tap


def value(rows=3, size=40):
    return torch.arange(rows * size, dtype=torch.float32).reshape(rows, size) / 7


def test_outside_a_tap_a_release_adds_exactly_the_engines_noise():
    v = value()
    noise = gaussian_noise((40,), [0.5, 1.0, 2.0], seed=4, silos=[2, 5, 9], round=3, stream=6)
    out = release(v, [0.5, 1.0, 2.0], seed=4, silos=[2, 5, 9], round=3, stream=6)
    assert torch.equal(out, v + noise)
    assert torch.equal(
        release_noise(v, 0.5, seed=4, silos=[2, 5, 9], round=3),
        0.5 * release_noise(v, 1.0, seed=4, silos=[2, 5, 9], round=3),
    )


def test_a_tap_records_silos_round_value_and_std_and_keeps_the_noise():
    v = value()
    with tap() as releases:
        out = release(v, [0.5, 1.0, 2.0], seed=4, silos=[2, 5, 9], round=3, secure_sum=True)
    assert torch.equal(out, release(v, [0.5, 1.0, 2.0], seed=4, silos=[2, 5, 9], round=3))
    (r,) = releases
    assert (r.silos, r.round, r.stream, r.secure_sum) == ((2, 5, 9), 3, 0, True)
    assert torch.equal(r.value, v)
    np.testing.assert_array_equal(r.std, [0.5, 1.0, 2.0])


def test_a_tap_without_noise_releases_the_value_itself_and_broadcasts_one_std():
    v = value()
    with tap(noise=False) as releases:
        out = release(v, 1.5, seed=4, silos=[0, 1, 2], round=1)
        v.add_(1.0)  # the record is a copy: later in-place updates do not reach it
    assert torch.equal(out, value())
    np.testing.assert_array_equal(releases[0].std, [1.5, 1.5, 1.5])
    assert torch.equal(releases[0].value, value())


def test_pre_drawn_noise_is_used_as_is_and_taps_do_not_nest():
    v, drawn = value(), torch.ones(3, 40)
    assert torch.equal(release_noise(v, 1.0, seed=0, silos=[0, 1, 2], round=1, drawn=drawn), drawn)
    with tap(), pytest.raises(RuntimeError, match="do not nest"), tap():
        pass
