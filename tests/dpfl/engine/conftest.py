import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Runs each engine test on one intra-op thread, then restores the previous setting.

    The tests' tensors are tiny, so threads buy nothing; on a busy CI machine OpenMP threads
    that spin-wait for a descheduled peer make them 10–50× slower.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
