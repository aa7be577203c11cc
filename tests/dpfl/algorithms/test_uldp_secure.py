"""The private weighting protocol of ULDP-AVG-w (reference 004 §2.9): exact to fixed point,
unsampled users add exactly zero, the server's view hides the per-silo counts, and the
parameter checks refuse keys too small for R = lcm(1..n_max)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from dpfl.algorithms.uldp.crypto import MODP_P
from dpfl.algorithms.uldp.secure import (
    SecureWeighting,
    encode,
    fixed_point_weighted_sum,
)
from dpfl.errors import SpecError

try:
    import gmpy2
except ImportError:
    gmpy2 = None

P = 10**10


def problem(seed: int, silos: int = 3, users: int = 10, d: int = 6, dtype=torch.float64):
    """Returns counts [S, U] (every user has records, some silos none of a user's), clipped
    deltas per silo [U, d] (norm ≤ 1, zero rows where a silo has no records of the user) and
    noise per silo [d]."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, size=(silos, users))
    counts[rng.integers(0, silos, users), np.arange(users)] += 1
    deltas = torch.as_tensor(rng.normal(size=(silos, users, d)), dtype=dtype)
    deltas = deltas / deltas.norm(dim=-1, keepdim=True).clamp(min=1.0)
    deltas *= torch.as_tensor(counts > 0, dtype=dtype)[..., None]
    noise = torch.as_tensor(rng.normal(scale=0.7, size=(silos, d)), dtype=dtype)
    return counts, list(deltas), list(noise)


def exact_sum(counts, deltas, noise, sampled=None) -> list[Fraction]:
    """Returns Σ_s Σ_u (n_su/N_u)·x_su + Σ_s z_s as exact rationals of the float inputs."""
    totals = counts.sum(axis=0)
    d = len(noise[0])
    out = [Fraction(0)] * d
    for s in range(len(counts)):
        for u in range(counts.shape[1]):
            if counts[s, u] and (sampled is None or sampled[u]):
                w = Fraction(int(counts[s, u]), int(totals[u]))
                out = [o + w * Fraction(float(x)) for o, x in zip(out, deltas[s][u], strict=True)]
        out = [o + Fraction(float(z)) for o, z in zip(out, noise[s], strict=True)]
    return out


def reconstruct(x: int, n: int, bound: int) -> Fraction | None:
    """The server's attack: returns a/b ≡ x (mod n) with 0 ≤ a ≤ bound, 1 ≤ b ≤ bound, if any."""
    for b in range(1, bound + 1):
        a = x * b % n
        if a <= bound:
            return Fraction(a, b)
    return None


def test_result_is_the_fixed_point_sum_and_within_the_rounding_bound():
    counts, deltas, noise = problem(0)
    S, U = counts.shape
    sw = SecureWeighting(counts, key_bits=1024, seed=1)
    out = sw.aggregate(1, deltas, noise)
    # Theorem 1: bit-for-bit the clear-text fixed-point computation.
    assert torch.equal(out, fixed_point_weighted_sum(counts, deltas, noise, precision=P))
    # Encode(v) = round(v·P) errs by ≤ 1/2 per term; the terms carry weights summing to ≤ 1 per
    # user (Σ_s w_su = 1) plus one noise term per silo, so |out − exact| ≤ (U + S)/(2P), plus
    # the single final rounding to float64.
    exact = exact_sum(counts, deltas, noise)
    bound = Fraction(U + S, 2 * P)
    for o, e in zip(out.tolist(), exact, strict=True):
        assert abs(Fraction(o) - e) <= bound + abs(e) * Fraction(1, 2**52)
    # At a coarse precision the fixed-point error is visible and still inside the bound.
    coarse = SecureWeighting(counts, key_bits=1024, precision=1e3, seed=1).aggregate(1, deltas, noise)
    errors = [abs(Fraction(o) - e) for o, e in zip(coarse.tolist(), exact, strict=True)]
    assert max(errors) <= Fraction(U + S, 2 * 10**3) + Fraction(1, 10**12)
    assert max(errors) > Fraction(1, 10**5)
    # float32 in, float32 out (the caller adds it to float32 parameters).
    out32 = sw.aggregate(2, [x.float() for x in deltas], [z.float() for z in noise])
    assert out32.dtype == torch.float32


def test_unsampled_users_contribute_exactly_zero():
    counts, deltas, noise = problem(1, users=12)
    sampled = np.random.default_rng(5).random(counts.shape[1]) < 0.5
    sw = SecureWeighting(counts, key_bits=1024, seed=2)
    first = sw.aggregate(1, deltas, noise, sampled=sampled)
    assert torch.equal(first, fixed_point_weighted_sum(counts, deltas, noise, precision=P, sampled=sampled))
    # Replace every unsampled user's rows by large values: the result does not move by one bit.
    loud = [x.clone() for x in deltas]
    for s, x in enumerate(loud):
        x[~sampled & (counts[s] > 0)] = 1e3
    assert torch.equal(sw.aggregate(2, loud, noise, sampled=sampled), first)
    full = sw.aggregate(3, deltas, noise)
    assert not torch.allclose(full, first)
    # A sampled round encrypts fresh ciphertexts for all U users; a full round after it, too
    # (first use), and the next full round reuses them.
    assert sw.cost.encrypt_s > 0 and sw.cost.broadcast_bytes == counts.shape[1] * 1024 // 4
    sw.aggregate(4, deltas, noise)
    assert sw.cost.encrypt_s == 0 and sw.cost.broadcast_bytes == 0


def test_server_view_depends_on_totals_only_and_hides_the_split():
    # Two federations with the same user totals N_u but different per-silo counts.
    split_a = np.array([[3, 0, 2, 1, 4, 0], [1, 2, 2, 0, 0, 5], [0, 3, 1, 4, 1, 1]])
    split_b = np.array([[0, 4, 1, 3, 2, 2], [4, 1, 0, 1, 3, 0], [0, 0, 4, 1, 0, 4]])
    assert (split_a.sum(0) == split_b.sum(0)).all() and (split_a != split_b).any()
    a = SecureWeighting(split_a, key_bits=1024, seed=3)
    b = SecureWeighting(split_b, key_bits=1024, seed=3)
    n, totals = a.modulus, split_a.sum(0)
    assert b.modulus == n
    # What the server can compute from the histograms, B_u = r_u·N_u mod n, is the same for
    # both splits, and is not N_u.
    blinded = a.server_view.blinded_totals
    assert blinded == b.server_view.blinded_totals
    assert list(blinded) == [r * int(t) % n for r, t in zip(a._silos[0].masks_r, totals, strict=True)]
    assert all(t != B for B, t in zip(blinded, totals, strict=True))
    # The attack: a blinded count divided by B_u is n_su/N_u mod n, which rational
    # reconstruction recovers. It works on unmasked uploads r_u·n_su (control) ...
    for view, counts in ((a.server_view, split_a), (b.server_view, split_b)):
        for s in range(3):
            for u, B in enumerate(blinded):
                unmasked = int(counts[s, u]) * B * pow(int(totals[u]), -1, n) % n
                found = reconstruct(unmasked * pow(B, -1, n) % n, n, a.n_max)
                assert found == Fraction(int(counts[s, u]), int(totals[u]))
                # ... and finds nothing in what the silos actually uploaded.
                masked = view.histogram_uploads[s][u]
                assert reconstruct(masked * pow(B, -1, n) % n, n, a.n_max) is None
    # A round: one silo's upload decrypts to a masked, full-size value; only the product over
    # silos decodes to the small fixed-point sum.
    _, deltas, noise = problem(2, users=6, d=4)
    a.aggregate(1, deltas, noise)
    width = 1024 // 4
    private = a._server._private
    limit = a.R * P * 100
    for payload in a.server_view.round_payloads:
        assert len(payload) == 4 * width == a.cost.bytes_per_silo
        for j in range(4):
            y = private.raw_decrypt(int.from_bytes(payload[j * width : (j + 1) * width], "big"))
            assert limit < y < n - limit
    product = 1
    for payload in a.server_view.round_payloads:
        product = product * int.from_bytes(payload[:width], "big") % (n * n)
    y = private.raw_decrypt(product)
    assert min(y, n - y) < limit


def test_cost_counts_what_was_serialised():
    counts, deltas, noise = problem(3, silos=4, users=8, d=5)
    sw = SecureWeighting(counts, key_bits=1024, seed=None)  # OS randomness, as deployed
    assert torch.equal(
        sw.aggregate(7, deltas, noise), fixed_point_weighted_sum(counts, deltas, noise, precision=P)
    )
    c = sw.cost
    assert c.setup_s > 0 and c.encrypt_s > 0 and c.aggregate_s > 0 and min(c.silo_s) > 0
    assert c.rounds == 1 and c.total_silo_s == c.silo_s and c.backend in ("gmpy2", "python")
    assert [len(p) for p in sw.server_view.round_payloads] == [c.bytes_per_silo] * 4
    assert c.bytes_per_silo == 5 * (2 * 1024) // 8  # five ciphertexts mod n², 256 bytes each
    # DH public key (256 bytes) and U blinded counts mod n (128 bytes); the leader also sends
    # the shared seed to the three others (32 bytes each).
    assert c.setup_bytes_per_silo == (256 + 8 * 128 + 3 * 32, 256 + 8 * 128, 256 + 8 * 128, 256 + 8 * 128)
    assert c.n_max == counts.sum(0).max() and c.r_bits == math.lcm(*range(1, c.n_max + 1)).bit_length()
    assert 900 < c.headroom_bits < 1024


def test_2048_bit_key_with_paper_sized_r():
    counts, deltas, noise = problem(4, silos=3, users=5, d=3)
    sw = SecureWeighting(counts, key_bits=2048, n_max=1000, seed=5)
    assert sw.cost.r_bits == 1438 and sw.modulus.bit_length() == 2048
    sampled = np.array([True, False, True, True, False])
    out = sw.aggregate(1, deltas, noise, sampled=sampled)
    assert torch.equal(out, fixed_point_weighted_sum(counts, deltas, noise, precision=P, sampled=sampled))


def test_headroom_refusal_names_n_max_and_the_largest_that_fits():
    counts = np.array([[2, 1, 0], [1, 1, 3]])
    with pytest.raises(SpecError) as info:
        SecureWeighting(counts, key_bits=1024, n_max=1000, seed=0)
    assert info.value.field == "params.n_max"
    assert str(info.value) == (
        "`params.n_max` is 1000, which needs more plaintext room than a 1024-bit Paillier key has: "
        "R = lcm(1..n_max) takes 1438 bits, precision 1e+10 and up to 5 terms of magnitude ≤ 1e+06 "
        "take 56.5 bits, 1494.4 bits in all, and the key leaves 1023. Lower params.n_max to at most "
        "660 (cap each user's records there) or raise params.key_bits to at least 1496 (e.g. 2048)."
    )
    # The suggestion is tight: 660 fits, 661 does not.
    assert SecureWeighting(counts, key_bits=1024, n_max=660, seed=0).cost.headroom_bits > 0
    with pytest.raises(SpecError):
        SecureWeighting(counts, key_bits=1024, n_max=661, seed=0)


def test_users_with_more_records_than_n_max_are_refused():
    counts = np.array([[2, 4, 0], [1, 3, 3]])
    with pytest.raises(SpecError) as info:
        SecureWeighting(counts, key_bits=1024, n_max=5, seed=0)
    assert str(info.value) == (
        "`params.n_max` is 5 but user 1 has 7 records across the silos (N_u must divide "
        "R = lcm(1..n_max)); cap every user's records at params.n_max before training, as the "
        "paper suggests, or raise params.n_max."
    )
    with pytest.raises(SpecError, match="needs at least two silos"):
        SecureWeighting(counts[:1], key_bits=1024, seed=0)


def test_rounds_cannot_repeat_and_values_must_fit():
    counts, deltas, noise = problem(5, users=4, d=2)
    sw = SecureWeighting(counts, key_bits=1024, seed=6)
    sw.aggregate(3, deltas, noise)
    with pytest.raises(ValueError, match="round 3 comes after round 3; each round needs a new, larger index"):
        sw.aggregate(3, deltas, noise)
    loud = [z.clone() for z in noise]
    loud[1][0] = 2e6
    with pytest.raises(ValueError, match="silo 1 sends a value of magnitude 2e"):
        sw.aggregate(4, deltas, loud)


def test_encode_rounds_exactly_beyond_int64():
    values = np.array([1e12, -1e12 / 3, 2.5e-10, -2.5e-10, 1.5e-10, 3e-300, 0.0, 123.456])
    expected = [math.floor(Fraction(float(v)) * P + Fraction(1, 2)) for v in values]
    assert encode(values, P) == expected
    assert expected[0] == 10**22  # beyond int64, where the authors' Encode overflows


def test_diffie_hellman_group_is_the_rfc_3526_safe_prime():
    is_prime = gmpy2.is_prime if gmpy2 is not None else __import__("phe.util").util.is_prime
    assert MODP_P.bit_length() == 2048
    assert is_prime(MODP_P) and is_prime((MODP_P - 1) // 2)
