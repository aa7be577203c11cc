"""The papers the project reproduces: short name (the CLI's PAPER), seed number and citation.

A module of its own, with no imports, so that the CLI can list them in its help without loading
the reproduction machinery.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAPERS", "PaperInfo"]


@dataclass(frozen=True)
class PaperInfo:
    """A paper we reproduce: its short name (the CLI's PAPER), seed number and citation."""

    key: str
    seed: str
    citation: str


PAPERS: dict[str, PaperInfo] = {
    p.key: p
    for p in (
        PaperInfo(
            "isrl",
            "000",
            "Lowy, Ghafelebashi & Razaviyayn, Private Non-Convex Federated Learning Without a Trusted Server",
        ),
        PaperInfo("newton", "001", "Cao, Guo & Zhang, Privacy-Preserving Distributed Learning via Newton"),
        PaperInfo("voting", "003", "Zhu et al., Voting-based Approaches for Differentially Private FL"),
        PaperInfo("uldp", "004", "Kato et al., ULDP-FL: Federated Learning with Across-Silo User-Level DP"),
    )
}
