"""Domain-adversarial training (DANN) of many local models at once: AE-DPFL+DA's teachers.

AE-DPFL+DA (reference/003_voting_dpfl.md §2.2; the paper's §5 on Digits) trains each agent's
local model with the domain-adversarial training of Ganin et al. (2016, JMLR 17, "Domain-
adversarial training of neural networks") on the agent's labelled records (the source domain)
and the server's unlabelled public pool (the target domain). The model splits into a feature
extractor G_f (every layer but the last) and its label classifier G_y (the last linear layer);
a domain classifier G_d (a one-hidden-layer MLP, 2 logits: source, target) reads the features
through a gradient reversal layer R_λ, the identity forward and −λ·(gradient) backward
(Ganin et al. §3.2, Eq. 14). One SGD step on

    L = L_y(G_y(G_f(x_s)), y_s) + L_d(G_d(R_λ(G_f(x))), d)

moves G_y and G_d down their own losses and G_f down L_y but *up* L_d (scaled by λ): features
that predict the label and hide the domain. λ follows Ganin et al.'s schedule (§5.2.2)

    λ_p = 2 / (1 + exp(−γ·p)) − 1,    γ = 10, p ∈ [0, 1] the fraction of training done,

so the domain classifier can first learn before its reversed gradient reaches the features.

Privacy: an agent's local model never leaves the agent (only its noisy votes do), and the
target records are the server's public pool, so DA changes no release and no sensitivity: the
ledger of AE-DPFL+DA is AE-DPFL's for the same σ and queries (the paper's Digits row lowers ε
only by raising σ from 25 to 30). The test split is never read here.

All agents train together, as `training.train_sgd` does: `vmap` over the agents of `grad` of
one agent's loss, in blocks of agents that fit in the cache, each agent's source minibatches
from `training.minibatches` and its target minibatches from its own generator.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from dpfl.algorithms.voting.training import largest_first, minibatches
from dpfl.engine import ParamLayout, models_per_block, sample_without_replacement, silo_generator
from dpfl.errors import SpecError
from dpfl.models import build_model, draws_randomness

__all__ = [
    "DANNTraining",
    "FeatureSplit",
    "annealed_rate",
    "domain_head",
    "feature_split",
    "reversal_weight",
    "reverse_gradient",
    "train_dann",
]


def reverse_gradient(x: torch.Tensor, weight: float | torch.Tensor) -> torch.Tensor:
    """R_λ (Ganin et al. 2016, Eq. 14): returns `x` unchanged; its gradient flows back multiplied
    by −`weight` (λ ≥ 0), a float or, under `vmap` over agents, each agent's own. The forward is
    `x` exactly: `x − x` is zero."""
    return x.detach() + (x - x.detach()) * -weight


def annealed_rate(lr: float, progress: float) -> float:
    """Returns Ganin et al.'s annealed learning rate μ_p = μ₀ / (1 + 10p)^0.75 at the fraction
    `progress` ∈ [0, 1] of training done (§5.2.2): the adversarial game diverges at a constant rate
    that plain SGD takes in its stride."""
    return lr / (1.0 + 10.0 * progress) ** 0.75


def reversal_weight(progress: float, *, gamma: float = 10.0) -> float:
    """Returns λ_p = 2/(1 + exp(−γp)) − 1 for the fraction `progress` ∈ [0, 1] of training done
    (Ganin et al. 2016 §5.2.2, γ = 10): 0 at the start, rising to ≈ 1."""
    return 2.0 / (1.0 + math.exp(-gamma * progress)) - 1.0


@dataclass(frozen=True)
class FeatureSplit:
    """A model cut below its last linear layer: the feature extractor and the label classifier.

    Attributes:
        features: the model's layers but the last (sharing its modules and parameter names).
        classifier: the last layer, an `nn.Linear` whose parameters are `prefix`.weight/bias.
        prefix: the last layer's name in the model.
        width: the number of features (the last layer's inputs).
    """

    features: nn.Module
    classifier: nn.Linear
    prefix: str
    width: int


def feature_split(model: nn.Module, *, name: str, algorithm: str) -> FeatureSplit:
    """Returns `model` cut into its features and its last linear layer.

    Raises:
        SpecError: the model is not a stack ending in a linear layer with trained layers below it
            (`logreg`, or an `mlp` without hidden layers): there are no features to adapt.
    """
    children = list(model.named_children()) if isinstance(model, nn.Sequential) else []
    below = children[:-1]
    if (
        not children
        or not isinstance(children[-1][1], nn.Linear)
        or not any(p.numel() for _, m in below for p in m.parameters())
    ):
        raise SpecError(
            "model.name",
            f"must have trained layers below its last linear layer for {algorithm}: its domain classifier "
            f"reads those features; {name!r} has none (use mlp with hidden layers, cnn, lenet, cifar_cnn "
            "or resnet_gn).",
        )
    prefix, last = children[-1]
    return FeatureSplit(nn.Sequential(OrderedDict(below)), last, prefix, last.in_features)


def domain_head(width: int, *, hidden: int, seed: int) -> nn.Module:
    """Returns G_d: `width` features → `hidden` ReLU units → 2 logits (source, target), as the
    registered `mlp` initialises it (Ganin et al. 2016 use 100 hidden units on MNIST → MNIST-M)."""
    return build_model("mlp", input_shape=(width,), num_classes=2, hidden=[hidden], seed=seed)


@dataclass(frozen=True)
class DANNTraining:
    """S local models after domain-adversarial training, and their losses (never released).

    Attributes:
        models: the models [S, P] in the spec model's layout (features and label classifier).
        heads: the domain classifiers [S, H] in `domain_head`'s layout.
        label_loss: each epoch's mean label loss of each model on its minibatches [epochs, S].
        domain_loss: each epoch's mean domain loss of each head, ½ (source + target) [epochs, S].
    """

    models: torch.Tensor
    heads: torch.Tensor
    label_loss: torch.Tensor
    domain_loss: torch.Tensor


def train_dann(
    model: nn.Module,
    layout: ParamLayout,
    head: nn.Module,
    init: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    rows: Sequence[torch.Tensor],
    target: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    momentum: float,
    gamma: float,
    seed: int,
    stream: int,
    target_stream: int,
) -> DANNTraining:
    """Returns S models trained from `init` [S, P] by DANN, model s on source records `x[rows[s]]`,
    `y[rows[s]]` and the unlabelled `target` records, with its own domain classifier from `head`.

    Every step of model s takes a minibatch of its source records as `train_sgd` does (the same
    draws for the same `seed`, `stream`) and `batch_size` target records, from a permutation of
    `target` per epoch drawn from `silo_generator(seed, s, epoch, target_stream)`. Both the model
    and its head step by SGD with heavy-ball momentum (v ← μv + g, w ← w − ηv) on

        L_s = Σ_i w_i CE(G_y(G_f(x_i)), y_i) + ½ [Σ_i w_i CE(G_d(R_λ(G_f(x_i))), 0)
                                                  + mean_j CE(G_d(R_λ(G_f(t_j))), 1)],

    w_i = 1/(real records in the batch) on real records, λ = `reversal_weight(p, gamma=gamma)`
    at the fraction p of its own steps done (⌈n_s/B⌉ an epoch). A model with no record never steps.

    Raises:
        ValueError: `init` is not [S, P] for S = len(rows), or `target` is empty.
    """
    if init.dim() != 2 or init.shape[0] != len(rows):
        raise ValueError(f"init must be [S, P] with S = {len(rows)} models; got shape {tuple(init.shape)}")
    if not len(target):
        raise ValueError("domain-adversarial training needs target records; got none")
    split = feature_split(model, name=type(model).__name__, algorithm="domain-adversarial training")
    head_layout = ParamLayout.of(head)
    models = init.detach().clone()
    heads = head_layout.flatten_module(head).expand(len(rows), -1).clone()
    label_loss = torch.zeros(epochs, len(rows))
    domain_loss = torch.zeros(epochs, len(rows))
    order = largest_first(rows)
    if not order or not len(rows[order[0]]):
        return DANNTraining(models, heads, label_loss, domain_loss)
    # each model's own steps an epoch: its schedule (λ_p, μ_p) reads its own records alone
    per_epoch = torch.tensor([math.ceil(len(r) / batch_size) for r in rows])
    # a model with dropout draws each agent's and each record's own masks (the caller seeds them)
    loss_grads = vmap(
        grad(_agent_loss(split, head), argnums=(0, 1), has_aux=True),
        in_dims=(0, 0, 0, 0, 0, 0, 0),
        randomness="different" if draws_randomness(model) else "error",
    )
    # twice the records of a plain step (source and target), and the head's parameters too
    largest = len(rows[order[0]])
    size = models_per_block(layout.size + head_layout.size, 2 * min(batch_size, largest), x[0].numel())
    for first in range(0, len(order), size):
        block = order[first : first + size]
        own = per_epoch[block]
        w, h = models[block], heads[block]
        v_w, v_h = torch.zeros_like(w), torch.zeros_like(h)
        targets = _target_batches(len(target), block, epochs, int(own[0]), batch_size, seed, target_stream)
        steps = minibatches(
            x,
            y,
            [rows[s] for s in block],
            block,
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            stream=stream,
        )
        for i, ((active, batch), index) in enumerate(zip(steps, targets, strict=True)):
            epoch, step = divmod(i, int(own[0]))
            mine = own[:active]
            progress = ((epoch * mine + step) / (epochs * mine)).tolist()
            weight = torch.tensor([reversal_weight(p, gamma=gamma) for p in progress])
            rate = torch.tensor([annealed_rate(lr, p) for p in progress]).unsqueeze(1)
            (g_w, g_h), (label, domain) = loss_grads(
                layout.unflatten(w[:active]),
                head_layout.unflatten(h[:active]),
                batch.x,
                batch.y,
                batch.mask,
                target[index[:active]],
                weight,
            )
            for params, velocity, g in ((w, v_w, layout.flatten(g_w)), (h, v_h, head_layout.flatten(g_h))):
                g = velocity[:active].mul_(momentum).add_(g) if momentum else g
                params[:active] -= rate * g
            rows_of = block[:active]
            label_loss[epoch, rows_of] += label / mine
            domain_loss[epoch, rows_of] += domain / mine
        models[block], heads[block] = w, h
    return DANNTraining(models, heads, label_loss, domain_loss)


def _agent_loss(split: FeatureSplit, head: nn.Module):
    """Returns one agent's L_s (see `train_dann`) as a function of its parameters, with its
    label and domain terms as the auxiliary output."""
    prefix = split.prefix + "."

    def loss(
        params: dict[str, torch.Tensor],
        head_params: dict[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        mask: torch.Tensor,
        target: torch.Tensor,
        weight: float,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        features = {k: v for k, v in params.items() if not k.startswith(prefix)}
        classifier = {k.removeprefix(prefix): v for k, v in params.items() if k.startswith(prefix)}
        count = mask.sum()
        w = mask / count.clamp(min=1)
        source = functional_call(split.features, features, (x,))
        logits = functional_call(split.classifier, classifier, (source,))
        label = (torch.where(mask, F.cross_entropy(logits, y, reduction="none"), 0.0) * w).sum()
        both = torch.cat([source, functional_call(split.features, features, (target,))])
        shared = reverse_gradient(both, weight)
        domains = torch.cat(
            [torch.zeros(len(x), dtype=torch.long), torch.ones(len(target), dtype=torch.long)]
        )
        d = F.cross_entropy(functional_call(head, head_params, (shared,)), domains, reduction="none")
        domain = 0.5 * ((torch.where(mask, d[: len(x)], 0.0) * w).sum() + d[len(x) :].mean())
        active = (count > 0).to(label.dtype)  # an agent without records takes no gradient
        return active * (label + domain), (label.detach(), domain.detach())

    return loss


def _target_batches(
    size: int, block: Sequence[int], epochs: int, per_epoch: int, batch_size: int, seed: int, stream: int
) -> Iterator[torch.Tensor]:
    """Yields each step's target rows [models, B] of a block: per epoch, model s walks its own
    permutation of the `size` target records from `silo_generator(seed, s, epoch, stream)`,
    wrapping around when an epoch takes more than `size` records."""
    span = torch.arange(batch_size)
    for epoch in range(epochs):
        perms = torch.stack(
            [sample_without_replacement(size, size, silo_generator(seed, s, epoch, stream)) for s in block]
        )
        for step in range(per_epoch):
            pos = (step * batch_size + span) % size
            yield perms[:, pos]
