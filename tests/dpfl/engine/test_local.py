"""Local SGD of many models at once equals each model trained alone with autograd."""

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad

from dpfl.algorithms import fedavg
from dpfl.engine import sgd_steps
from dpfl.engine.sampling import minibatches
from dpfl.runner import prepare
from dpfl.spec import parse_spec
from tests.dpfl.engine.factories import model_and_layout, silo_params, unequal_batch


def _alone(model, layout, start, batches, lr, momentum=0.0):
    """One model's SGD (heavy-ball momentum) on its own real records of each batch, by autograd."""
    params = layout.unflatten(start.clone())
    velocity = {k: torch.zeros_like(v) for k, v in params.items()}
    for x, y in batches:
        if not len(y):
            continue

        def loss(p, x=x, y=y):
            return F.cross_entropy(functional_call(model, p, (x,)), y)

        step = grad(loss)(params)
        velocity = {k: momentum * velocity[k] + step[k] for k in params}
        params = {k: v - lr * velocity[k] for k, v in params.items()}
    return layout.flatten(params)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("name", ["mlp", "logreg", "cnn"])
def test_each_row_steps_alone_on_its_real_records(name, momentum):
    """Linear stacks step layer by layer in place, the CNN through `mean_grad`: either way each
    row's model is its own SGD on its own real records; rows past `active` sit a step out
    (their velocity too)."""
    model, layout = model_and_layout(name)
    start = silo_params(model, layout, 4)
    before = start.clone()
    steps = [
        (4, unequal_batch(name, [3, 5, 1, 4], seed=3)),
        (2, unequal_batch(name, [2, 4], seed=4)),
        (3, unequal_batch(name, [4, 2, 3], seed=5)),
    ]
    out = sgd_steps(model, layout, start, 4, iter(steps), lr=0.1, momentum=momentum)
    for row in range(4):
        mine = [(b.silo(row).x[0], b.silo(row).y[0]) for active, b in steps if row < active]
        expected = _alone(model, layout, start[row], mine, 0.1, momentum)
        torch.testing.assert_close(out[row], expected, atol=1e-6, rtol=1e-5)
    assert torch.equal(start, before) and not torch.equal(out, start)  # it trained, start left alone
    # one model [P] for every row
    shared = sgd_steps(model, layout, start[0], 4, iter(steps), lr=0.1, momentum=momentum)
    torch.testing.assert_close(shared[0], out[0])


def test_fedavg_local_sgd_in_blocks_equals_each_silo_alone(monkeypatch):
    """FedAvg's silos train in cache-sized blocks; three silos a block here (10 silos: 4 blocks,
    the last of one), and each silo's model is its own SGD on its own minibatches."""
    spec = parse_spec(
        {
            "algorithm": "fedavg",
            "params": {"lr": 0.1, "local_steps": 3, "batch_size": 8},
            "dataset": {"name": "digits", "silos": 10},
            "model": {"name": "mlp", "hidden": [16]},
            "rounds": 1,
            "seed": 0,
        }
    )
    alg = prepare(spec)
    alg.setup(None)
    silos = list(range(10))
    monkeypatch.setattr(fedavg, "models_per_block", lambda *_: 3)
    local = fedavg.local_sgd(alg, silos, 1, lr=0.1, batch_size=8, steps=3)
    data = alg.data
    drawn = minibatches(
        data.x_train, data.y_train, data.silos, silos=silos, batch_size=8, steps=3, seed=0, round=1
    )
    for s in silos:
        mine = [(b.silo(s).x[0], b.silo(s).y[0]) for b in drawn]
        expected = _alone(alg.model, alg.layout, alg.w, mine, 0.1)
        torch.testing.assert_close(local[s], expected, atol=1e-6, rtol=1e-5)
