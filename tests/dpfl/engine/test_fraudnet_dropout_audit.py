"""An adversarial audit of `fraudnet`'s dropout path: what a round releases with dropout on has
the sensitivity its ledger event assumes.

The guarantee rests on three things, each measured here in float64 through the engine's own
`clipped_grad_sum` / `per_sample_grads` and the algorithms' real rounds:

- each sample's clipped gradient has norm ≤ C whatever its dropout masks (the masks are drawn
  in the forward pass, before the norm is taken and the clip applied);
- the masks are drawn by slot of the batch from the round's generator (`model_draws`), never
  from the records: a neighbour that changes one record in place (its content, or masks it out)
  leaves every other record's masks, gradient and clipped term as they were, bit for bit, so a
  silo's sum moves by exactly one clipped term;
- the Gaussian noise is added after, to the clipped sum, with std σ·C.

A neighbour that changes the batch's *layout* (a record added to or removed from the largest
silo changes the padded width, so every later slot's masks shift) draws other masks for the
other records too: at one key the release then moves by several C (measured below). The
release's sensitivity holds over the masks' distribution (i.i.d. Bernoulli per slot in every
layout, independent of the data and of the noise), not at a fixed key, which is why the key is
the run's `noise_key`, secret in a protected run, not the public spec seed. It is the bound of
the coupling that gives each record common to D and D′ its own masks in both worlds, which is
what the auditor measures: its fixed-key releases key each mask by record (`dpfl.audit.masks`),
so `dpfl audit` of a fraudnet round finds ratio 1 and no violation where D′ changes the layout
(it reported a violation at 6.98 C and 11.5 C before), and still catches a planted mutation that
clips what the masks do not produce.

Planted mutations, each run here and caught: dropout applied to the clipped gradient (after the
clip, inverted-dropout scaling inflates its norm), masks drawn from a seed hashed from the data
(every other record's masks move with the neighbour), and masks seeded from the public spec seed
(the runner's masks would be computable from the published spec).
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from dpfl import runner
from dpfl.algorithms.base import RoundOutput, participants
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD
from dpfl.audit.fuzz import TOLERANCE, fixed_sample_spec, fuzz
from dpfl.audit.neighbours import record_neighbours
from dpfl.audit.rounds import NO_VIOLATION, audit_first_round
from dpfl.engine import ParamLayout, SiloBatch, clipped_grad_sum, per_sample_grads, tap
from dpfl.engine.noise import gaussian_noise, model_draws
from dpfl.models import build_model
from dpfl.spec import parse_spec

F64 = torch.float64
P_DROP = 0.5
KEYS = range(16)


def fraudnet(seed: int = 0) -> tuple[nn.Module, ParamLayout, torch.Tensor]:
    """fraudnet in training mode (dropout on), in float64, with its flat parameters."""
    model = build_model("fraudnet", input_shape=(30,), num_classes=2, seed=seed).to(F64)
    layout = ParamLayout.of(model)
    assert model.training
    return model, layout, layout.flatten_module(model)


def records(silos: int, size: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(silos, size, 30, generator=gen, dtype=F64), torch.randint(
        0, 2, (silos, size), generator=gen
    )


def drawn(key: int, compute):
    """Returns compute() with round 1's dropout masks of `key`, as the runner draws them."""
    with model_draws(key, 1):
        return compute()


def masks_of(model: nn.Module, layout: ParamLayout, grads: torch.Tensor) -> torch.Tensor:
    """Reads each sample's last dropout mask [S, B, 30] (True: kept) off its per-sample gradient.

    The last Linear's weight gradient is δ ⊗ (h ⊙ m / (1 − p)): column j is zero exactly where
    unit j was dropped (δ, the softmax's error, and h, a GroupNorm output, are nonzero)."""
    last = layout.unflatten(grads)[f"{len(model) - 1}.weight"]  # [S, B, 2, 30]
    return last.abs().sum(-2) > 0


def clip_each(per_sample: torch.Tensor, clip: float) -> torch.Tensor:
    """Each sample's gradient times min(1, C/‖g‖), one at a time in Python, [S, B, P]."""
    out = torch.zeros_like(per_sample)
    for s in range(per_sample.shape[0]):
        for i in range(per_sample.shape[1]):
            norm = float(per_sample[s, i].norm())
            out[s, i] = per_sample[s, i] * (min(1.0, clip / norm) if norm > 0 else 1.0)
    return out


def worst_norm_ratio(contributions: torch.Tensor, clip: float) -> float:
    """The audit's check: the largest norm of a released per-sample contribution, over C."""
    return float(contributions.norm(dim=-1).max()) / clip


def adversarial_singletons(seed: int = 1) -> SiloBatch:
    """Silos of one sample each, so each silo's clipped sum is that sample's clipped gradient:
    inputs from 1e-6 to 1e4 and exactly zero, labels right and wrong."""
    x, y = records(10, 1, seed)
    scales = torch.tensor([1e-6, 1e-3, 1.0, 1.0, 10.0, 1e2, 1e3, 1e4, 0.0, 1.0], dtype=F64)
    x = x * scales.view(-1, 1, 1)
    x[9, 0, :15] = 0.0  # half its features blank
    return SiloBatch.full(x, y)


@pytest.mark.parametrize("clip", [1e-6, 1e-2, 1.0, 20.0])
def test_every_clipped_gradient_has_norm_at_most_c_whatever_its_masks(clip):
    """16 keys × 10 adversarial samples: each released term is the gradient *with its masks*
    clipped to min(‖g‖, C). GroupNorm keeps the gradients' norms within 3–60 whatever the input's
    scale, so C = 20 clips some and not others; the measured worst norm is C exactly."""
    model, layout, flat = fraudnet()
    batch = adversarial_singletons()
    worst, clipped, unclipped = 0.0, 0, 0
    for key in KEYS:
        result = drawn(key, lambda: clipped_grad_sum(model, layout, flat, batch, clip=clip))
        grads = drawn(key, lambda: per_sample_grads(model, layout, flat, batch))  # the same masks
        torch.testing.assert_close(result.norms, grads.norm(dim=-1), rtol=1e-12, atol=0.0)
        torch.testing.assert_close(result.sum, clip_each(grads, clip)[:, 0], rtol=1e-10, atol=1e-300)
        bound = torch.clamp(result.norms[:, 0], max=clip)
        torch.testing.assert_close(result.sum.norm(dim=-1), bound, rtol=1e-10, atol=0.0)
        worst = max(worst, worst_norm_ratio(result.sum, clip))
        clipped += int((result.norms[:, 0] > clip).sum())
        unclipped += int((result.norms[:, 0] <= clip).sum())
    assert worst <= 1 + 1e-12 and worst == pytest.approx(1.0, abs=1e-12)
    assert clipped > 0 and (clip < 20 or unclipped > 0)


def dropout_after_clipping(model, layout, flat, batch, clip) -> torch.Tensor:
    """Planted mutation: the gradient clipped without dropout, then a dropout mask drawn and the
    kept coordinates scaled by 1/(1 − p), as a careless port of dropout to the update would."""
    model.eval()
    try:
        clipped = clip_each(per_sample_grads(model, layout, flat, batch), clip)[:, 0]
    finally:
        model.train()
    kept = torch.rand(clipped.shape, dtype=F64) >= P_DROP
    return clipped * kept / (1 - P_DROP)


def test_a_mask_drawn_after_clipping_is_caught_by_the_norm_check():
    model, layout, flat = fraudnet()
    batch = adversarial_singletons()
    clip = 1e-2  # every sample but the tiniest is clipped
    worst = max(
        worst_norm_ratio(drawn(key, lambda: dropout_after_clipping(model, layout, flat, batch, clip)), clip)
        for key in KEYS
    )
    # ‖m ⊙ g‖/(1 − p) ≈ ‖g‖/√(1 − p): √2·C for p = 0.5 (measured 1.59 C at worst)
    assert worst > 1.3
    assert worst == pytest.approx(1.59, abs=0.02)


def in_place_neighbours(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, s: int, i: int):
    """Yields (name, D′) for record (s, i) of D changed in place: the same layout, the same slot."""
    huge = x.clone()
    huge[s, i] *= 1_000.0
    yield "×1000, label flipped", SiloBatch(huge, torch.where(_at(y, s, i), 1 - y, y), mask)
    zero = x.clone()
    zero[s, i] = 0.0
    yield "all features zero", SiloBatch(zero, y, mask)
    yield "label flipped", SiloBatch(x, torch.where(_at(y, s, i), 1 - y, y), mask)
    removed = mask.clone()
    removed[s, i] = False
    garbage = x.clone()
    garbage[s, i] = 37.0
    yield "removed (its slot padding holding garbage)", SiloBatch(garbage, y, removed)


def _at(y: torch.Tensor, s: int, i: int) -> torch.Tensor:
    at = torch.zeros_like(y, dtype=torch.bool)
    at[s, i] = True
    return at


def three_silos() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, y = records(3, 6, seed=4)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[2, 4:] = False  # a smaller silo, padded
    return x, y, mask


def test_masks_are_drawn_by_slot_never_from_the_records():
    """Each neighbour of record (1, 2) changed in place: every other record's gradient (hence its
    masks, read off the last layer) is the same bit for bit at each key; the masks themselves are
    fresh draws: about half the units kept, no two slots alike, other keys other masks."""
    model, layout, flat = fraudnet()
    x, y, mask = three_silos()
    d = SiloBatch(x, y, mask)
    others = mask.clone()
    others[1, 2] = False
    kept = []
    for key in range(4):
        g = drawn(key, lambda: per_sample_grads(model, layout, flat, d))
        masks = masks_of(model, layout, g)
        kept.append(masks[mask])
        for _, dp in in_place_neighbours(x, y, mask, 1, 2):
            gp = drawn(key, lambda dp=dp: per_sample_grads(model, layout, flat, dp))
            assert torch.equal(g[others], gp[others])
            assert torch.equal(masks[others], masks_of(model, layout, gp)[others])
    units = torch.stack(kept)  # [keys, 16 real samples, 30 units]
    rate = float(units.double().mean())
    assert abs(rate - (1 - P_DROP)) < 4 * (0.25 / units.numel()) ** 0.5  # 4 σ of 1,920 Bernoulli(½)
    assert all(len({tuple(row.tolist()) for row in per_key}) == 16 for per_key in units)
    assert all(not torch.equal(units[0], units[k]) for k in range(1, 4))


def data_dependent_masks(model, layout, flat, batch: SiloBatch, clip: float):
    """Planted mutation: masks drawn from a seed hashed from the batch's records."""
    digest = hashlib.blake2b(batch.x.numpy().tobytes(), digest_size=8).digest()
    return drawn(
        int.from_bytes(digest, "little") >> 1, lambda: clipped_grad_sum(model, layout, flat, batch, clip=clip)
    )


def worst_move(model, layout, flat, clip, compute) -> tuple[float, float]:
    """Returns the largest ‖Σ_D − Σ_D′‖/C of any silo's clipped sum over keys, records of silo 1
    and their in-place neighbours: (removals, replacements)."""
    x, y, mask = three_silos()
    d = SiloBatch(x, y, mask)
    removed = replaced = 0.0
    for key in range(8):
        sums = compute(key, d)
        for i in range(6):
            for name, dp in in_place_neighbours(x, y, mask, 1, i):
                move = float((sums - compute(key, dp)).norm(dim=-1).max()) / clip
                if name.startswith("removed"):
                    removed = max(removed, move)
                else:
                    replaced = max(replaced, move)
    return removed, replaced


def test_an_in_place_neighbour_moves_the_clipped_sum_by_one_clipped_term():
    """A record removed from its slot moves its silo's sum by exactly its clipped gradient (with
    its masks, at the same key), ≤ C, and no other silo's at all; a record replaced, ≤ 2C."""
    model, layout, flat = fraudnet()
    x, y, mask = three_silos()
    norms = per_sample_grads(model.eval(), layout, flat, SiloBatch(x, y, mask)).norm(dim=-1)[mask]
    model.train()
    clip = float(norms.median())  # some records clipped, some not (without dropout)
    d = SiloBatch(x, y, mask)
    for key in range(4):
        whole = drawn(key, lambda: clipped_grad_sum(model, layout, flat, d, clip=clip))
        terms = clip_each(drawn(key, lambda: per_sample_grads(model, layout, flat, d)), clip)
        for i in range(6):
            *_, (_, without) = in_place_neighbours(x, y, mask, 1, i)
            part = drawn(
                key, lambda without=without: clipped_grad_sum(model, layout, flat, without, clip=clip)
            )
            torch.testing.assert_close(whole.sum[1] - part.sum[1], terms[1, i], rtol=1e-9, atol=1e-15)
            assert torch.equal(whole.sum[[0, 2]], part.sum[[0, 2]])

    def real(key, batch):
        return drawn(key, lambda: clipped_grad_sum(model, layout, flat, batch, clip=clip)).sum

    removed, replaced = worst_move(model, layout, flat, clip, real)
    assert removed <= 1 + 1e-9 and replaced <= 2 + 1e-9
    assert removed == pytest.approx(1.0, abs=1e-9)  # a clipped record's term: exactly C
    # a flipped label: two classes' gradients are ±(∇z₁ − ∇z₀) times a scalar, so both clipped
    # terms are C in opposite directions: 2C exactly
    assert replaced == pytest.approx(2.0, abs=1e-9)

    # Planted: masks from a seed hashed from the data. Every other record's masks move with the
    # neighbour: the sum moves by several C (measured 3.41 C both ways).
    def mutant(key, batch):
        return data_dependent_masks(model, layout, flat, batch, clip).sum

    mutant_removed, mutant_replaced = worst_move(model, layout, flat, clip, mutant)
    assert mutant_removed > 3 and mutant_replaced > 3
    assert mutant_removed == pytest.approx(3.41, abs=0.01) and mutant_replaced == pytest.approx(
        3.42, abs=0.01
    )


def test_another_batch_width_draws_other_masks_for_every_later_silo():
    """Silo 0 one record longer pads every silo to 7: silo 1's records, unchanged, get other
    masks at the same key and its clipped sum moves by several C although its data did not
    change. Across keys the masks are Bernoulli(½) in both layouts: the release's distribution
    is the same, its value at one key is not. So the masks must come from a secret key."""
    model, layout, flat = fraudnet()
    x, y = records(3, 7, seed=5)
    narrow = SiloBatch(x[:, :6], y[:, :6], torch.ones(3, 6, dtype=torch.bool))
    wide_mask = torch.ones(3, 7, dtype=torch.bool)
    wide_mask[1:, 6] = False
    wide = SiloBatch(x, y, wide_mask)
    clip = 0.05
    moves, same_masks, rates = [], 0, {6: [], 7: []}
    for key in KEYS:
        a = drawn(key, lambda: per_sample_grads(model, layout, flat, narrow))
        b = drawn(key, lambda: per_sample_grads(model, layout, flat, wide))
        ma, mb = masks_of(model, layout, a)[1], masks_of(model, layout, b)[1, :6]
        same_masks += sum(torch.equal(ma[i], mb[i]) for i in range(6))
        rates[6].append(ma.double().mean())
        rates[7].append(mb.double().mean())
        sa = clip_each(a, clip)[1].sum(0)
        sb = clip_each(b, clip)[1, :6].sum(0)
        moves.append(float((sa - sb).norm()) / clip)
    assert same_masks == 0
    assert min(moves) > 3 and max(moves) == pytest.approx(3.57, abs=0.01)  # measured 3.24–3.57 C
    for width, per_key in rates.items():
        assert abs(float(torch.stack(per_key).mean()) - 0.5) < 4 * (0.25 / (16 * 6 * 30)) ** 0.5, width


# --- the algorithms' rounds on a card_data Creditcard file ---------------------------------------


SIGMA = 1.3


def prepared(folder: Path, algorithm: str, **extra):
    raw = {
        "algorithm": algorithm,
        "params": extra.pop("params", {}),
        "dataset": {"name": "creditcard", "silos": 3} | extra.pop("dataset", {}),
        "model": {"name": "fraudnet"},
        "rounds": 1,
        "seed": 3,
        "privacy": {"noise_multiplier": SIGMA, "delta": 1e-5},
    } | extra
    spec = parse_spec(raw)
    alg = runner.prepare(spec, data_dirs=[folder])
    return type(alg)(fixed_sample_spec(spec, alg.data), alg.data, alg.model)


def slot_masked_moves(alg, pairs) -> list[float]:
    """Returns, for each pair, how far round 1's pre-noise release moves at the run's key with the
    masks drawn by slot as the runner draws them (`model_draws`), over C: the largest silo's move,
    or the sum's for a secure sum. The fixed-key comparison the auditor made before its masks were
    keyed by record."""

    def release(data):
        run = type(alg)(alg.spec, data, copy.deepcopy(alg.model))
        run.setup(SIGMA)
        with model_draws(run.noise_key, 1), tap(noise=False) as releases:
            run.round(1)
        return releases[0]

    out = []
    for pair in pairs:
        d, dp = release(pair.d), release(pair.d_prime)
        diff = (d.value - dp.value).double()
        out.append(float(diff.sum(0).norm() if d.secure_sum else diff.norm(dim=1).max()) / alg.params.clip)
    return out


@pytest.mark.parametrize(("algorithm", "slot_moves"), [("isrl_mbsgd", 6.98), ("dp_fedsgd", 11.55)])
def test_record_level_rounds_move_one_clipped_term_whatever_the_layout(card_data, algorithm, slot_moves):
    """The fuzzer's neighbours (the last record of a silo removed; a ×1000 canary or a flipped copy
    added) on fraudnet with dropout. Silos 1 and 2 (21 records) keep the batch width; silo 0 holds
    the most (22), so its neighbours change the width and every silo's slots. With the masks by
    slot at one key, silo 0's neighbours move the release by several C (measured, as the auditor
    reported before): other records' masks, not the unit. The fuzzer keys each mask by record (the
    coupling the guarantee is about): every neighbour moves the release by exactly C (ratio 1.0),
    and with one release per silo, no other silo's (but for float32 rounding where the width
    changed)."""
    alg = prepared(card_data, algorithm)
    assert [len(s) for s in alg.data.silos] == [22, 21, 21]
    gaps = fuzz(alg, SIGMA)
    assert all(g.claimed_sensitivity == pytest.approx(alg.params.clip) for g in gaps)
    kept = [g for g in gaps if not g.neighbours.startswith("silo 0")]
    shifted = [g for g in gaps if g.neighbours.startswith("silo 0")]
    assert len(kept) == 2 * len(shifted) > 0
    for found in (kept, shifted):
        assert max(g.ratio for g in found) <= 1 + TOLERANCE
        assert max(g.ratio for g in found) == pytest.approx(1.0, abs=1e-6)
    if algorithm == "isrl_mbsgd":  # one release per silo: only the neighbour's own silo moves
        others = [g for g in gaps if g.party != "silo-" + g.neighbours.split(":")[0][-1]]
        assert all(g.gap == 0.0 for g in others if g in kept)
        # another width sums the same terms in another float32 order: 6.1e-7 C measured
        assert 0 < max(g.ratio for g in others) < 1e-5
    moves = slot_masked_moves(alg, record_neighbours(alg.data, silos=[0]))
    assert min(moves) > 3 and max(moves) == pytest.approx(slot_moves, abs=0.05)


@pytest.mark.parametrize("algorithm", ["isrl_mbsgd", "dp_fedsgd"])
def test_dpfl_audit_of_a_fraudnet_round_is_sound(card_data, algorithm):
    """`audit_first_round` (what `dpfl audit` and the API's audit run) on a fraudnet spec whose
    largest silo's neighbours change the batch layout: every release's worst ratio is 1 (it was
    6.98 for ISRL-DP MB-SGD and 11.5 for DP-FedSGD, a "violation"), its ε lower bound below the
    ledger's, and the verdict "no violation found"."""
    spec = parse_spec(
        {
            "algorithm": algorithm,
            "dataset": {"name": "creditcard", "silos": 3},
            "model": {"name": "fraudnet"},
            "rounds": 1,
            "seed": 3,
            "privacy": {"noise_multiplier": SIGMA, "delta": 1e-5},
        }
    )
    audits = audit_first_round(spec, data_dirs=[card_data], trials=2_000)
    assert len(audits) == (3 if algorithm == "isrl_mbsgd" else 1)
    for audit in audits:
        assert audit.max_sensitivity_ratio <= 1 + TOLERANCE
        assert audit.max_sensitivity_ratio == pytest.approx(1.0, abs=1e-6)
        assert audit.epsilon_lower < audit.epsilon_ledger
        assert audit.verdict == NO_VIOLATION and audit.sound


class DropoutAfterClipping(ISRLMinibatchSGD):
    """Planted: each gradient clipped without dropout (eval mode), then an inverted-dropout mask
    drawn for it from the round's generator and applied, as a careless port of dropout to the
    update would: a released term's norm reaches ‖g‖/√(1 − p) ≈ √2·C."""

    def round(self, r: int) -> RoundOutput:
        silos = participants(self.spec, r, self.noise_key)
        batch = self.batch(silos, r)
        self.model.eval()
        try:
            grads = per_sample_grads(self.model, self.layout, self.w, batch)
        finally:
            self.model.train()
        norms = grads.norm(dim=-1)
        terms = grads * (self.params.clip / norms.clamp(min=self.params.clip)).unsqueeze(-1)
        kept = torch.rand(terms.shape) >= P_DROP
        return self.conclude(r, silos, batch, (terms * kept / (1 - P_DROP)).sum(1), norms)


class NormWithoutMasks(ISRLMinibatchSGD):
    """Planted: the gradient taken with its dropout masks, its clip factor from its norm without
    them (a second pass in eval mode): a masked gradient's norm is not the one clipped."""

    def round(self, r: int) -> RoundOutput:
        silos = participants(self.spec, r, self.noise_key)
        batch = self.batch(silos, r)
        grads = per_sample_grads(self.model, self.layout, self.w, batch)
        self.model.eval()
        try:
            norms = per_sample_grads(self.model, self.layout, self.w, batch).norm(dim=-1)
        finally:
            self.model.train()
        terms = grads * (self.params.clip / norms.clamp(min=self.params.clip)).unsqueeze(-1)
        return self.conclude(r, silos, batch, terms.sum(1), norms)


@pytest.mark.parametrize(("mutant", "measured"), [(DropoutAfterClipping, 1.44), (NormWithoutMasks, 3.48)])
def test_the_fuzzer_still_catches_a_clip_the_masks_escape(card_data, mutant, measured):
    """Two planted ISRL-DP MB-SGD rounds on fraudnet, fuzzed as the audit fuzzes: a neighbour in
    silo 1 or 2 (the layout kept) moves the release by the unit's released term, whose norm is
    above C: ratio > 1, a violation (measured). NormWithoutMasks is caught only because the
    audited masks are in the forward pass the engine clips: fuzzed with dropout off (the model in
    eval mode), its worst ratio was 1.0000002."""
    alg = prepared(card_data, "isrl_mbsgd")
    gaps = fuzz(mutant(alg.spec, alg.data, alg.model), SIGMA)
    kept = max(g.ratio for g in gaps if not g.neighbours.startswith("silo 0"))
    assert kept > 1.2
    assert kept == pytest.approx(measured, abs=0.01)


def test_noise_is_added_to_the_clipped_sum_after_the_masks(card_data):
    """ISRL-DP MB-SGD's round 1 on every record: what each silo releases before noise is the
    engine's clipped sum of its records with round 1's masks; the noise is the silo's own
    N(0, σ²C²) draw, added after: the model with noise minus the model without is exactly
    η · mean_s(noise_s / n_s)."""
    alg = prepared(card_data, "isrl_mbsgd")
    key, clip, lr = alg.noise_key, alg.params.clip, alg.params.lr
    runs = []
    for noise in (False, True):
        run = type(alg)(alg.spec, alg.data, alg.model)
        run.setup(SIGMA)
        with model_draws(key, 1), tap(noise=noise) as releases:
            run.round(1)
        runs.append((run.w, releases))
    (clean, (release,)), (noisy, (again,)) = runs
    silos = np.arange(3)
    batch = alg.batch(silos, 1)
    assert batch.counts().tolist() == [22, 21, 21]  # every record: the sample is fixed
    expected = drawn(
        key,
        lambda: clipped_grad_sum(
            alg.model, alg.layout, alg.layout.flatten_module(alg.model), batch, clip=clip
        ),
    )
    assert torch.equal(release.value, expected.sum) and torch.equal(again.value, expected.sum)
    np.testing.assert_allclose(release.std, SIGMA * clip)
    noise = gaussian_noise((alg.layout.size,), SIGMA * clip, seed=key, silos=silos, round=1)
    sizes = torch.as_tensor(alg.rates[silos] * alg.data.silo_sizes[silos], dtype=noise.dtype).unsqueeze(1)
    assert sizes.squeeze(1).tolist() == [22.0, 21.0, 21.0]  # q = 1: the expected batch is the silo
    torch.testing.assert_close(clean - noisy, lr * (noise / sizes).mean(0), rtol=1e-4, atol=1e-7)
    assert float(noise.norm(dim=1).min()) > 10 * clip  # the noise itself was never clipped


def test_uldp_avg_clips_each_users_delta_with_its_masks_to_c(card_data):
    """ULDP-AVG's round 1 with dropout in every local step, under 8 keys: each (silo, user) delta
    is clipped to ≤ C after its local training, and a user's weighted terms over silos sum to ≤ C
    (measured: C exactly, every delta being clipped)."""
    alg = prepared(
        card_data,
        "uldp_avg",
        params={"local_epochs": 1, "batch_size": 4, "clip": 0.05},
        dataset={"users": {"kind": "uniform", "count": 12}},
    )
    alg.setup(SIGMA)
    cls = type(alg)
    groups = alg.groups(np.arange(3), None)
    worst_row = worst_user = 0.0
    rows_by_key = []
    for key in range(8):
        _, rows, _ = drawn(key, lambda: cls.silo_sums([alg], 1, [np.arange(3)], groups, keep=True))
        norms = rows.norm(dim=1)
        worst_row = max(worst_row, float(norms.max()) / alg.params.clip)
        per_user = np.zeros(alg.users.num_users)
        np.add.at(
            per_user, groups.user, (norms * torch.as_tensor(alg.weights[groups.silo, groups.user])).numpy()
        )
        worst_user = max(worst_user, float(per_user.max()) / alg.params.clip)
        rows_by_key.append(rows)
    assert worst_row <= 1 + 1e-6 and worst_user <= 1 + 1e-6
    assert worst_row == pytest.approx(1.0, abs=1e-6) and worst_user == pytest.approx(1.0, abs=1e-6)
    assert not torch.equal(rows_by_key[0], rows_by_key[1])  # the masks did change the deltas


def test_a_runs_masks_come_from_its_noise_key_not_the_published_seed(card_data):
    """A run whose mechanisms draw from OS entropy: round 1's pre-noise release is the one its
    secret key's masks give. Planted: masks seeded from the spec's public seed (the runner's keying
    before this audit) give another release, so the check tells the two apart."""
    spec = parse_spec(
        {
            "algorithm": "isrl_mbsgd",
            "params": {"batch_size": 64},
            "dataset": {"name": "creditcard", "silos": 3},
            "model": {"name": "fraudnet"},
            "rounds": 1,
            "seed": 3,
            "privacy": {"noise_multiplier": SIGMA, "delta": 1e-5, "noise_source": "entropy"},
        }
    )
    started = runner.start(spec, data_dirs=[card_data], device="cpu")
    secret = started.algorithm.noise_key
    assert secret != spec.seed
    with tap(noise=False) as releases:
        runner.train([started])
    (released,) = releases

    def round_one(mask_key: int) -> torch.Tensor:
        twin = runner.prepare(spec, data_dirs=[card_data])
        twin.noise_key = secret  # the same sample and noise: only the masks' key differs
        twin.setup(started.privacy.noise_multiplier)
        with model_draws(mask_key, 1), tap(noise=False) as found:
            twin.round(1)
        return found[0].value

    assert torch.equal(released.value, round_one(secret))
    assert not torch.equal(released.value, round_one(spec.seed))
