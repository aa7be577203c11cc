"""What the ULDP algorithms share: the user-level party, the plan of one release per round,
clipping of many deltas at once, and the checks that the spec allocates users and one σ.

Under user-level DP across silos the protected unit is a user wherever its records sit, so
the whole federation is one party of the ledger, `users`: each round releases the noisy sum
over silos once (reference §3.2, Thms 3–5).
"""

from __future__ import annotations

import numpy as np
import torch

from dpfl.data import UserAllocation
from dpfl.errors import SpecError
from dpfl.federation import FederatedData
from dpfl.privacy.events import Event
from dpfl.privacy.ledger import Ledger
from dpfl.spec import RunSpec

__all__ = ["USERS_PARTY", "clip_rows", "require_one_noise_multiplier", "require_users", "user_level_plan"]

USERS_PARTY = "users"


def user_level_plan(spec: RunSpec, event: Event) -> Ledger:
    """Returns the ledger of one `event` per round for the party `users`."""
    ledger = Ledger()
    for r in range(1, spec.rounds + 1):
        ledger.record(r, USERS_PARTY, event)
    return ledger


def clip_rows(
    rows: torch.Tensor, clip: float, *, in_place: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns each row scaled to L2 norm ≤ clip ([G, P]) and whether each row was clipped ([G]);
    `rows` itself scaled if `in_place`.

    The factor is C / max(‖v‖, C): never above 1, no division by zero (the paper's code adds
    1e-6 to the norm instead, which lets a norm of exactly C through unscaled; same bound).
    """
    norms = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
    factor = clip / norms.clamp(min=clip)
    return rows.mul_(factor) if in_place else rows * factor, norms[:, 0] > clip


def require_users(name: str, data: FederatedData) -> UserAllocation:
    """Returns the run's user allocation; raises SpecError when the spec gives none."""
    if data.users is None:
        raise SpecError(
            "dataset.users",
            f"is required for {name}: say who owns each record, e.g. "
            "`users: {kind: zipf, count: 100}` (kinds: uniform, balanced, zipf, natural).",
        )
    return data.users


def require_one_noise_multiplier(name: str, noise_multiplier) -> None:
    """Raises SpecError unless σ is one number: the user-level release is one noisy sum over silos."""
    if noise_multiplier is None or np.ndim(noise_multiplier) != 0:
        raise SpecError("privacy", f"{name} takes one noise multiplier for all silos.")
