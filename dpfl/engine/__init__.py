"""Vectorised simulation: all silos of a round in one batched computation.

Parameters are flat ([P], or [S, P] for one model per silo; `params`), a round's data is a
padded, masked `SiloBatch` (`batch`), gradients, clipping and evaluation are in `grads`
(with ghost clipping for linear models in `ghost`, and for convolutional ones a dense pass
over every silo's samples in `convclip`), and randomness that does not depend on
how silos are batched is in `noise`; every Gaussian release goes through `release`, where
the auditor can tap it. `local` trains many models' local SGD at once, and `blocks` says
how many models to train at once.
"""

from dpfl.engine.batch import SiloBatch
from dpfl.engine.blocks import models_per_block
from dpfl.engine.grads import (
    ClippedSum,
    Evaluation,
    clipped_grad_sum,
    evaluate,
    ghost_clipping_applies,
    mean_grad,
    per_sample_grads,
)
from dpfl.engine.local import sgd_steps
from dpfl.engine.noise import (
    NOISE_STREAM,
    SAMPLING_STREAM,
    gaussian_noise,
    sample_without_replacement,
    silo_generator,
)
from dpfl.engine.params import ParamLayout, stack_copies
from dpfl.engine.release import Release, release, release_noise, tap

__all__ = [
    "NOISE_STREAM",
    "SAMPLING_STREAM",
    "ClippedSum",
    "Evaluation",
    "ParamLayout",
    "Release",
    "SiloBatch",
    "clipped_grad_sum",
    "evaluate",
    "gaussian_noise",
    "ghost_clipping_applies",
    "mean_grad",
    "models_per_block",
    "per_sample_grads",
    "release",
    "release_noise",
    "sample_without_replacement",
    "sgd_steps",
    "silo_generator",
    "stack_copies",
    "tap",
]
