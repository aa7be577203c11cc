import numpy as np
import pytest
import torch

from dpfl.engine import SiloBatch


def records():
    x = np.arange(20, dtype=np.float64).reshape(10, 2)  # row i is (2i, 2i + 1)
    y = np.arange(10) % 3
    return x, y


def test_equal_index_arrays_gather_without_padding():
    x, y = records()
    batch = SiloBatch.from_indices(x, y, [np.array([0, 5]), np.array([9, 1])])
    assert batch.x.dtype == torch.float32 and batch.y.dtype == torch.int64
    assert batch.x.tolist() == [[[0, 1], [10, 11]], [[18, 19], [2, 3]]]
    assert batch.y.tolist() == [[0, 2], [0, 1]]
    assert bool(batch.mask.all())
    assert (batch.num_silos, batch.batch_size) == (2, 2)


def test_unequal_index_arrays_are_padded_with_zeros_and_masked():
    x, y = records()
    batch = SiloBatch.from_indices(x, y, [[3], torch.tensor([4, 6, 8]), []])
    assert batch.x.shape == (3, 3, 2)
    assert batch.mask.tolist() == [[True, False, False], [True, True, True], [False, False, False]]
    assert batch.counts().tolist() == [1, 3, 0]
    assert batch.x[0].tolist() == [[6, 7], [0, 0], [0, 0]]
    assert batch.y[0].tolist() == [0, 0, 0]
    assert batch.x[1].tolist() == [[8, 9], [12, 13], [16, 17]]


def test_silo_returns_one_silo_without_padding():
    x, y = records()
    batch = SiloBatch.from_indices(x, y, [[3], [4, 6, 8]])
    alone = batch.silo(0)
    assert alone.x.tolist() == [[[6, 7]]]
    assert alone.y.tolist() == [[0]]
    assert alone.mask.tolist() == [[True]]


def test_full_marks_every_sample_real():
    batch = SiloBatch.full(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.int32))
    assert batch.y.dtype == torch.int64
    assert batch.counts().tolist() == [3, 3]


def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError, match=r"got shapes \(2, 3, 4\), \(2, 4\), \(2, 4\)"):
        SiloBatch(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long), torch.ones(2, 4).bool())
    with pytest.raises(ValueError, match=r"SiloBatch\.mask must be torch\.bool; got torch\.float32"):
        SiloBatch(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3))


def test_full_puts_its_mask_where_the_labels_are():
    # a batch built on a GPU had its mask on the CPU, and the dense conv pass failed there
    batch = SiloBatch.full(torch.zeros(2, 3, 4, device="meta"), torch.zeros(2, 3, device="meta"))
    assert batch.mask.device.type == "meta" and batch.mask.dtype == torch.bool
