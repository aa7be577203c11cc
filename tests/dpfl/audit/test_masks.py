"""The fuzzer's dropout masks keyed by record (`dpfl.audit.masks`): measured on fraudnet in float64
through the engine's own `per_sample_grads` / `clipped_grad_sum`, each mask read off the sample's
gradient (`masks_of`: the last layer's columns are zero exactly where a unit was dropped)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from dpfl.audit.masks import RecordKeyedDropout, key_masks_by_record, record_fingerprints
from dpfl.engine import ParamLayout, SiloBatch, clipped_grad_sum, per_sample_grads
from dpfl.engine.noise import model_draws
from dpfl.models import draws_randomness
from tests.dpfl.engine.test_fraudnet_dropout_audit import P_DROP, clip_each, fraudnet, masks_of, records


def keyed(model: nn.Module, key: int = 3) -> nn.Module:
    return key_masks_by_record(copy.deepcopy(model), key=key, round=1)


def two_layouts() -> tuple[SiloBatch, SiloBatch]:
    """D: 3 silos of 6 records. D′: the same records, with one more in front of silo 1 (its records
    each one slot later) and silo 1 seven wide, so every silo is padded to 7."""
    x, y = records(3, 7, seed=6)
    d = SiloBatch(x[:, 1:].contiguous(), y[:, 1:].contiguous(), torch.ones(3, 6, dtype=torch.bool))
    x2, y2 = torch.zeros(3, 7, 30, dtype=x.dtype), torch.zeros(3, 7, dtype=y.dtype)
    x2[:, :6], y2[:, :6] = d.x, d.y
    x2[1], y2[1] = x[1], y[1]  # the new record at slot 0, the others shifted by one
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[:, :6] = True
    mask[1] = True
    return d, SiloBatch(x2, y2, mask)


def test_the_model_keeps_its_parameters_and_its_dropout_p():
    model, layout, _ = fraudnet()
    audited = keyed(model)
    assert ParamLayout.of(audited).names == layout.names
    assert list(audited.state_dict()) == list(model.state_dict())
    swapped = [m for m in audited.modules() if isinstance(m, RecordKeyedDropout)]
    assert len(swapped) == 4 and all(m.p == P_DROP for m in swapped)
    assert draws_randomness(audited)  # the engine takes the branch dropout takes
    assert not any(type(m) is nn.Dropout for m in audited.modules())
    assert all(type(m) is nn.Dropout for m in model.modules() if isinstance(m, nn.Dropout))  # a copy


def test_a_records_masks_follow_it_to_any_slot():
    """Every record of D keeps its masks, bit for bit, in D′ where it sits one slot later in a
    wider batch (the slot masks at one key give none of them its masks again), and so its
    gradient, to float rounding."""
    model, layout, flat = fraudnet()
    audited = keyed(model)
    d, dp = two_layouts()
    g, gp = (per_sample_grads(audited, layout, flat, b) for b in (d, dp))
    common = [(s, i, i + (s == 1)) for s in range(3) for i in range(6)]
    masks, masks_p = masks_of(audited, layout, g), masks_of(audited, layout, gp)
    assert all(torch.equal(masks[s, i], masks_p[s, j]) for s, i, j in common)
    for s, i, j in common:
        torch.testing.assert_close(g[s, i], gp[s, j], rtol=1e-12, atol=1e-15)
    with model_draws(3, 1):
        slot = masks_of(model, layout, per_sample_grads(model, layout, flat, d))
    with model_draws(3, 1):
        slot_p = masks_of(model, layout, per_sample_grads(model, layout, flat, dp))
    assert sum(torch.equal(slot[s, i], slot_p[s, j]) for s, i, j in common) == 0


def test_the_masks_are_bernoulli_per_record_unit_and_key():
    """400 records × 30 units of the last dropout layer, under two keys: kept at rate 1 − p (within
    4 σ), no two records alike, another key other masks; in eval mode no mask at all."""
    model, layout, flat = fraudnet()
    x, y = records(4, 100, seed=7)
    batch = SiloBatch.full(x, y)
    masks = [masks_of(model, layout, per_sample_grads(keyed(model, k), layout, flat, batch)) for k in (3, 4)]
    for m in masks:
        assert abs(float(m.double().mean()) - (1 - P_DROP)) < 4 * (0.25 / m.numel()) ** 0.5
        assert len({tuple(row.tolist()) for row in m.reshape(-1, 30)}) == 400
    assert float((masks[0] != masks[1]).double().mean()) == pytest.approx(0.5, abs=4 * (0.25 / 12_000) ** 0.5)
    off = keyed(model).eval()
    torch.testing.assert_close(
        per_sample_grads(off, layout, flat, batch),
        per_sample_grads(model.eval(), layout, flat, batch),
        rtol=0,
        atol=0,
    )


def test_a_layout_changing_neighbour_moves_the_clipped_sum_by_one_clipped_term():
    """D′ = D with a record added in front of silo 1 and every silo wider: silo 1's clipped sum
    moves by that record's clipped gradient (norm C exactly), the others' not at all but for
    float rounding; each released term has norm ≤ C with its masks."""
    model, layout, flat = fraudnet()
    audited = keyed(model)
    d, dp = two_layouts()
    clip = 0.05  # every record clipped
    whole, part = (clipped_grad_sum(audited, layout, flat, b, clip=clip) for b in (dp, d))
    term = clip_each(per_sample_grads(audited, layout, flat, dp), clip)[1, 0]
    torch.testing.assert_close(whole.sum[1] - part.sum[1], term, rtol=1e-9, atol=1e-15)
    assert float(term.norm()) == pytest.approx(clip, rel=1e-12)
    torch.testing.assert_close(whole.sum[[0, 2]], part.sum[[0, 2]], rtol=1e-12, atol=1e-15)
    terms = clip_each(per_sample_grads(audited, layout, flat, dp), clip)
    assert float(terms.norm(dim=-1).max()) <= clip * (1 + 1e-12)


def test_a_fingerprint_reads_every_bit_of_the_record():
    x, _ = records(1, 5, seed=8)
    rows = x[0]
    base = record_fingerprints(rows)
    assert len(set(base.tolist())) == 5 and int(base.min()) >= 0 and int(base.max()) < 2**32
    nudged = rows.clone()
    nudged[2, 17] = torch.nextafter(nudged[2, 17], torch.tensor(10.0, dtype=rows.dtype))
    changed = record_fingerprints(nudged)
    assert changed[2] != base[2] and torch.equal(changed[[0, 1, 3, 4]], base[[0, 1, 3, 4]])
    assert torch.equal(record_fingerprints(rows.float()), record_fingerprints(rows.float().double()))


def test_a_random_layer_it_cannot_key_is_refused():
    model = nn.Sequential(nn.Linear(4, 4), nn.AlphaDropout(0.2), nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"AlphaDropout \(1\) is not one"):
        key_masks_by_record(model, key=0, round=1)
