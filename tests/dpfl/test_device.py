"""Where a run computes (`dpfl.device`): the setting, its refusals, and the device-aware path.

This machine has no GPU, so the device-aware path is run on the CPU: every algorithm under the mode
that creates tensors on the run's device (what `dpfl.device.placed` enters for a GPU), with its data
moved by `FederatedData.to`. It must give the numbers of the plain path exactly: the random draws
are made on the CPU either way, and nothing else may depend on where a tensor is born. On a GPU,
scripts/gpu_check.py runs the same algorithms on CUDA.
"""

import dataclasses

import pytest
import torch

from dpfl import runner
from dpfl.algorithms import registered_algorithms
from dpfl.device import add_rows_, resolve_device
from dpfl.errors import SpecError
from dpfl.spec import parse_spec
from tests.dpfl.audit.test_conformance import CASES, spec_of
from tests.factories import data_dir, run_cli

# the non-private algorithms, on the smallest setting each takes
PLAIN = {
    "fedavg": {"name": "digits", "silos": 3},
    "fedavg_2lr": {"name": "digits", "silos": 3},
    "localnewton": {"name": "logistic", "silos": 3, "options": {"num_samples": 400, "num_test": 100}},
}


def device_spec(name):
    if name in CASES:
        return spec_of(name)
    return parse_spec(
        {"algorithm": name, "dataset": PLAIN[name], "model": {"name": "logreg"}, "rounds": 2, "seed": 3}
    )


def numbers(result):
    """Returns accuracy, loss, ε and metrics of every evaluated round (but whether the voting
    family's votes came from its cache: the second run's do)."""
    return [
        dataclasses.replace(r, metrics={k: v for k, v in r.metrics.items() if k != "votes_cached"})
        for r in result.rounds
    ]


def test_every_algorithm_has_a_device_case():
    assert sorted(CASES.keys() | PLAIN.keys()) == registered_algorithms()


@pytest.mark.parametrize("name", registered_algorithms())
def test_the_device_aware_path_gives_the_numbers_of_the_plain_one(name):
    spec = device_spec(name)
    plain = runner.run(spec, data_dirs=[data_dir()], device="cpu")
    with torch.device("cpu"):  # every tensor created inside is placed, as under a GPU's `placed`
        placed = runner.run(spec, data_dirs=[data_dir()], device=torch.device("cpu"))
    assert numbers(placed) == numbers(plain)
    assert placed.ledger.entries == plain.ledger.entries
    assert torch.equal(placed.final_params, plain.final_params)
    assert placed.final_params.device.type == "cpu"


def test_the_device_is_named_or_defaults_to_what_the_machine_has(monkeypatch):
    monkeypatch.delenv("DPFL_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(None).type == expected
    assert resolve_device("auto").type == expected
    assert resolve_device(" CPU ") == torch.device("cpu")
    monkeypatch.setenv("DPFL_DEVICE", "cpu")
    assert resolve_device(None) == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a GPU this machine lacks")
def test_a_device_this_machine_lacks_is_refused_naming_the_field():
    with pytest.raises(SpecError) as err:
        resolve_device("cuda")
    assert str(err.value) == "`device` is 'cuda', but PyTorch here sees no CUDA device; use one of cpu."
    with pytest.raises(SpecError) as err:
        resolve_device("tpu", field="--device")
    assert str(err.value) == "`--device` must be auto, cpu, cuda or cuda:<index>; got 'tpu'."


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a GPU this machine lacks")
def test_the_cli_refuses_a_missing_gpu_in_one_line(capsys, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "algorithm: fedavg\ndataset: {name: digits, silos: 2}\nmodel: {name: logreg}\nrounds: 1\n"
    )
    code, out, err = run_cli(capsys, "run", str(spec), "--device", "cuda:1")
    assert code == 1 and out == ""
    assert (
        err.strip() == "error: `--device` is 'cuda:1', but PyTorch here sees no CUDA device; use one of cpu."
    )


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu-check.sh)")


@CUDA
@pytest.mark.parametrize("name", registered_algorithms())
def test_a_run_on_the_gpu_repeats_itself_and_releases_what_it_does_on_the_cpu(name):
    spec = device_spec(name)
    cpu = runner.run(spec, data_dirs=[data_dir()], device="cpu")
    first, second = (runner.run(spec, data_dirs=[data_dir()], device="cuda") for _ in range(2))
    assert numbers(second) == numbers(first)  # the same numbers on the same device
    assert torch.equal(second.final_params, first.final_params)
    assert first.ledger.entries == cpu.ledger.entries  # the same draws: the same releases
    assert first.final_params.device.type == "cpu"
    # the same training up to floating-point summation order
    assert torch.allclose(first.final_params, cpu.final_params, rtol=1e-3, atol=1e-4)
    assert [r.accuracy for r in first.rounds] == pytest.approx([r.accuracy for r in cpu.rounds], abs=0.02)


@CUDA
def test_the_cpu_default_gives_way_to_the_gpu(monkeypatch):
    monkeypatch.delenv("DPFL_DEVICE", raising=False)
    assert resolve_device(None) == torch.device("cuda")
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(
        SpecError, match=r"^`device` is 'cuda:9', but PyTorch here sees the devices cpu, cuda:0"
    ):
        resolve_device("cuda:9")


@CUDA
def test_rows_added_on_the_gpu_sum_in_a_fixed_order():
    gen = torch.Generator().manual_seed(0)
    rows, index = torch.randn(5000, 300, generator=gen), torch.randint(0, 7, (5000,), generator=gen)
    expected = torch.zeros(7, 300, dtype=torch.float64).index_add_(0, index, rows.double())
    sums = [add_rows_(torch.zeros(7, 300, device="cuda"), index.cuda(), rows.cuda()).cpu() for _ in range(3)]
    assert torch.equal(sums[0], sums[1]) and torch.equal(sums[0], sums[2])
    assert torch.allclose(sums[0].double(), expected, atol=1e-3)
