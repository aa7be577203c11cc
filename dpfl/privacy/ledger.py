"""The ε ledger: every release of a run, per (round, party), and the ε it adds up to.

A party is whoever's data a release touches and whose guarantee is accounted on its own: a
silo (ISRL-DP, record-level per silo), the server's aggregate (user-level ULDP, agent-level
voting), a user group. The run's ε is the maximum over parties at the last round: parties
hold disjoint data, so each party's guarantee is the guarantee for its own records (parallel
composition), and the run is as private as its least private party.

The ledger is plain data (`to_json`), the shape the database stores. Its public form leaves out
what events withhold (a vote's noiseless histogram, `Event.withheld`): that is private data
without noise, kept apart and read only by the data-dependent accountant. ε is always recomputed
from the events, for any accountant and δ. Parties with identical histories (the common case:
every silo releases the same mechanism) are accounted once, and accountants cache per
distinct event, so 100 parties × 1,000 rounds recompute in well under a second with `rdp`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from dpfl.privacy.accountants import headline_problem, make_accountant, rdp_pruned
from dpfl.privacy.events import ComposedEvent, Event, SelfComposedEvent, from_json, public_event, to_json

__all__ = ["Ledger", "LedgerEntry", "history_epsilon", "history_epsilons"]

_PRUNED_ROUNDS = 300  # histories this long or shorter take rdp_pruned's curve


class LedgerEntry(NamedTuple):
    """One release: in `round`, `party` released `event`. A named tuple: a plan of 25 silos ×
    50 rounds makes 1,250 of them, and calibration asks for dozens of plans."""

    round: int
    party: str
    event: Event

    def to_json(self, *, withheld: bool = False) -> dict[str, Any]:
        """Returns {"round", "party", "event"} with the event as JSON, without its withheld
        fields unless `withheld` (only the accountant path may ask for them)."""
        event = self.event if withheld else public_event(self.event)
        return {"round": self.round, "party": self.party, "event": to_json(event)}


class Ledger:
    """Events per (round, party), answering cumulative ε per party per round for any accountant."""

    def __init__(self, entries: Iterable[LedgerEntry] = ()):
        self.entries: list[LedgerEntry] = list(entries)

    def record(self, round: int, party: str, event: Event) -> None:
        """Appends one release."""
        self.entries.append(LedgerEntry(round, party, event))

    def record_round(self, round: int, events: Mapping[str, Event | Sequence[Event]]) -> None:
        """Appends the releases of one round: party ↦ event or events."""
        for party, evs in events.items():
            for event in [evs] if isinstance(evs, Event) else evs:
                self.record(round, party, event)

    @property
    def parties(self) -> list[str]:
        """Returns the parties in order of first release."""
        return list(dict.fromkeys(e.party for e in self.entries))

    @property
    def rounds(self) -> list[int]:
        """Returns the rounds with at least one release, ascending."""
        return sorted({e.round for e in self.entries})

    def party_events(self) -> dict[str, Event]:
        """Returns party ↦ one event composing all its releases (repeats folded into counts)."""
        # Counted by object first: a plan releases the same event objects round after round, and
        # hashing an event walks all its fields. Equal events then merge, in order of first release.
        by_object: dict[tuple[str, int], list] = {}
        for e in self.entries:
            slot = by_object.get((e.party, id(e.event)))
            if slot is None:
                by_object[(e.party, id(e.event))] = [e.event, 1]
            else:
                slot[1] += 1
        counts: dict[str, dict[Event, int]] = {}
        for (party, _), (event, n) in by_object.items():
            per = counts.setdefault(party, {})
            per[event] = per.get(event, 0) + n
        return {
            party: ComposedEvent(tuple(ev if n == 1 else SelfComposedEvent(ev, n) for ev, n in per.items()))
            for party, per in counts.items()
        }

    def to_json(self, *, withheld: bool = False) -> list[dict[str, Any]]:
        """Returns the entries as JSON-ready dicts: the public ledger (no vote histograms) unless
        `withheld`, which only the accountant path may ask for."""
        return [e.to_json(withheld=withheld) for e in self.entries]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]]) -> Ledger:
        """Returns the ledger that `to_json` wrote."""
        return cls(LedgerEntry(int(d["round"]), str(d["party"]), from_json(d["event"])) for d in data)

    def epsilon_curves(
        self, *, delta: float, accountant: str = "rdp", after: Sequence[int] | None = None, **options
    ) -> dict[str, np.ndarray]:
        """Returns party ↦ cumulative ε after each of `after` (default `self.rounds`), carried over
        rounds a party skips; 0 before a party's first release.

        A run's records need ε after a few rounds (its evaluations) of a long history: asking for
        those alone searches the RDP orders that hold their minima, not every round's. Where this
        process has already accounted every round of each party's history (a run's projection
        accounts its plan, which is what a simulation run releases), those curves are read instead.
        """
        rounds = self.rounds
        histories, of_party = self._histories(rounds)
        if after is not None and (after := list(after)) != rounds:
            _check_increasing(after)
            remembered = self._remembered(histories, rounds, delta=delta, accountant=accountant, **options)
            if remembered is None:
                return self._curves_after(after, delta=delta, accountant=accountant, **options)
            last = np.searchsorted(rounds, after, side="right") - 1
            return {party: _read(remembered[key], last) for party, key in of_party.items()}
        eps = history_epsilons(list(histories.values()), delta=delta, accountant=accountant, **options)
        curves = dict(zip(histories, eps, strict=True))
        return {party: curves[key] for party, key in of_party.items()}

    @staticmethod
    def _remembered(
        histories: Mapping[bytes, tuple[list[Event], np.ndarray]],
        rounds: list[int],
        *,
        delta: float,
        accountant: str,
        **options,
    ) -> dict[bytes, np.ndarray] | None:
        """Returns every history's curve over all its rounds (0 before its first release) if this
        process has accounted each one already (`rdp_pruned.remembered_epsilon_curve`), else None."""
        if len(rounds) > _PRUNED_ROUNDS:
            return None
        out = {}
        for key, (events, counts) in histories.items():
            if not rdp_pruned.applies(accountant, events):
                return None
            curve = rdp_pruned.remembered_epsilon_curve(
                events, counts, delta=delta, **rdp_pruned.pruned_options(options)
            )
            if curve is None:
                return None
            out[key] = _released(curve, counts)
        return out

    def _histories(
        self, rounds: list[int]
    ) -> tuple[dict[bytes, tuple[list[Event], np.ndarray]], dict[str, bytes]]:
        """Returns each distinct party history as (its distinct events, [rounds, events] release
        counts) by a key, and each party's key: identical histories are accounted once."""
        round_index = {r: i for i, r in enumerate(rounds)}
        event_ids: dict[Event, int] = {}  # each distinct event hashed once per entry, then integers
        party_ids: dict[str, int] = {}
        triples = np.array(
            [
                (
                    party_ids.setdefault(e.party, len(party_ids)),
                    round_index[e.round],
                    event_ids.setdefault(e.event, len(event_ids)),
                )
                for e in self.entries
            ],
            dtype=np.int64,
        ).reshape(-1, 3)
        events = list(event_ids)
        triples = triples[np.lexsort((triples[:, 2], triples[:, 1], triples[:, 0]))]
        starts = np.searchsorted(triples[:, 0], np.arange(len(party_ids) + 1))
        histories: dict[bytes, tuple[list[Event], np.ndarray]] = {}
        of_party: dict[str, bytes] = {}
        for party, pid in party_ids.items():
            history = triples[starts[pid] : starts[pid + 1], 1:]
            key = history.tobytes()
            of_party[party] = key
            if key not in histories:
                used, local = np.unique(history[:, 1], return_inverse=True)
                counts = np.zeros((len(rounds), len(used)))
                np.add.at(counts, (history[:, 0], local), 1.0)
                histories[key] = ([events[i] for i in used], counts)
        return histories, of_party

    def _curves_after(
        self, after: list[int], *, delta: float, accountant: str, **options
    ) -> dict[str, np.ndarray]:
        """`epsilon_curves` after arbitrary rounds: the ledger with each asked round's releases
        merged into it (those since the round asked before), accounted as a history of its own.
        `after` is increasing (`epsilon_curves` checks it)."""
        slot = np.searchsorted(after, [e.round for e in self.entries])  # the first asked round ≥ it
        merged = Ledger(
            LedgerEntry(after[i], e.party, e.event)
            for e, i in zip(self.entries, slot.tolist(), strict=True)
            if i < len(after)
        )
        curves = merged.epsilon_curves(delta=delta, accountant=accountant, **options)
        # a party that releases only after the last asked round is 0 throughout, as in full curves
        last = np.searchsorted(merged.rounds, after, side="right") - 1
        zeros = np.zeros(len(merged.rounds))
        return {party: _read(curves.get(party, zeros), last) for party in self.parties}

    def epsilon_by_round(
        self, *, delta: float, accountant: str = "rdp", after: Sequence[int] | None = None, **options
    ) -> np.ndarray:
        """Returns the run's ε after each of `after` (default `self.rounds`): the maximum over parties."""
        after = None if after is None else list(after)
        curves = self.epsilon_curves(delta=delta, accountant=accountant, after=after, **options)
        if not curves:
            return np.zeros(0 if after is None else len(after))
        return np.max(np.stack(list(curves.values())), axis=0)

    def epsilon(self, *, delta: float, accountant: str = "rdp", **options) -> float:
        """Returns the run's ε: the maximum over parties of their ε after the last round (0 if empty)."""
        if not self.entries:
            return 0.0
        last = max(e.round for e in self.entries)
        return float(self.epsilon_by_round(delta=delta, accountant=accountant, after=[last], **options)[0])

    def headline_accountant(self, accountant: str | None) -> str:
        """Returns the accountant of the run's headline ε: its own (default `rdp`), or `rdp` where
        that one cannot give a headline ε for these releases (a run admitted before the rule)."""
        accountant = accountant or "rdp"
        if headline_problem(accountant, self.party_events().values()) is not None:
            return "rdp"
        return accountant

    def headline_epsilon(self, *, accountant: str | None, delta: float) -> float:
        """Returns the ε the run has spent, by its headline accountant: what settles its budget."""
        return self.epsilon(delta=delta, accountant=self.headline_accountant(accountant))


def history_epsilon(
    events: Sequence[Event], counts: np.ndarray, *, delta: float, accountant: str = "rdp", **options
) -> np.ndarray:
    """Returns a party's cumulative ε after each round of its history (`counts`: [rounds, events]
    releases of each distinct event), 0 before its first release: the one computation of a
    history's ε. `rdp_pruned` keeps the curves it computes, which `Ledger._remembered` reads."""
    return history_epsilons([(events, counts)], delta=delta, accountant=accountant, **options)[0]


def history_epsilons(
    histories: Sequence[tuple[Sequence[Event], np.ndarray]],
    *,
    delta: float,
    accountant: str = "rdp",
    **options,
) -> list[np.ndarray]:
    """Returns `history_epsilon` of each (events, counts) history; those `rdp_pruned` takes are
    searched together, in one branch and bound (`rdp_pruned.pruned_epsilon_curves`)."""
    # the same ε from few RDP orders; past some 400 rounds the search over every round costs
    # more than whole curves (docs/benchmarks.md, ledger)
    pruned = [
        i
        for i, (events, counts) in enumerate(histories)
        if len(counts) <= _PRUNED_ROUNDS and rdp_pruned.applies(accountant, events)
    ]
    curves: dict[int, np.ndarray] = {}
    if pruned:
        together = rdp_pruned.pruned_epsilon_curves(
            [histories[i] for i in pruned], delta=delta, **rdp_pruned.pruned_options(options)
        )
        curves = dict(zip(pruned, together, strict=True))
    for i, (events, counts) in enumerate(histories):
        if i not in curves:
            curves[i] = make_accountant(accountant, **options).epsilon_curve(events, counts, delta=delta)
    return [_released(curves[i], counts) for i, (_, counts) in enumerate(histories)]


def _check_increasing(after: list[int]) -> None:
    if any(b <= a for a, b in itertools.pairwise(after)):
        raise ValueError(f"`after` must be increasing; got {after}")


def _read(curve: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Returns ε after each asked round: the curve at the last round at or before it (`last`,
    an index into the curve's rounds), 0 where there is none yet (`last` = −1, the curve may be
    empty)."""
    return np.concatenate([[0.0], curve])[last + 1]


def _released(curve: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Returns a party's ε per round with 0 before its first release: there a conversion of zero
    RDP (rdp's "classic") gives log(1/δ)/(α − 1) > 0, not the ε of nothing released."""
    out = curve.copy()
    out[: int(np.argmax(counts.any(axis=1)))] = 0.0
    return out
