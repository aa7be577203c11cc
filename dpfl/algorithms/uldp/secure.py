"""The private weighting protocol of ULDP-AVG-w (Protocol 1; reference 004 §2.9, §2.6, Thm 1).

Each round ULDP-AVG-w releases Σ_s Σ_u w_{s,u}·Clip(Δ_{s,u}, C) + Σ_s z_s with records-
proportional weights w_{s,u} = n_{s,u}/N_u. Computing them in the clear would show every silo's
per-user record counts to the server (or to the other silos). The protocol computes the same sum
while the server sees only multiplicatively blinded totals r_u·N_u mod n and one decrypted sum
per coordinate, and each silo sees only its own counts, the shared masks r_u and ciphertexts.

Setup, once (§2.9 (a)–(f)):
  (a) the server makes a Paillier key (modulus n); each silo a Diffie–Hellman key in the RFC 3526
      2048-bit MODP group; R = lcm(1..n_max), so N_u | R for every user with N_u ≤ n_max;
  (b) the server relays the DH public keys; every pair of silos derives a 256-bit key k_{s,s'};
  (c) silo 0 draws a 256-bit seed ρ and sends it to each silo encrypted under their pair key,
      through the server, so all silos share ρ and the server does not;
  (d) every silo derives r_u ∈ Z_n^* from ρ and blinds its histogram: b_{s,u} = r_u·n_{s,u} mod n;
  (e) each silo adds antisymmetric pairwise masks and uploads b'_{s,u}; the server's sum is
      B_u = Σ_s b'_{s,u} = r_u·N_u mod n (masks cancel);
  (f) the server inverts: β_u = B_u⁻¹ mod n, so r_u·β_u = N_u⁻¹ mod n.
Each round t:
  (a) the server encrypts c_u = Enc(β_u), with β_u = 0 for users left out by user sub-sampling
      (-ws); without sub-sampling the ciphertexts are made once and reused;
  (b) silo s computes per coordinate E_{s,j} = Π_u c_u^{n_{s,u} r_u R · Encode(Δ_{s,u,j})}, whose
      plaintext is the exact integer (n_{s,u}/N_u)·R·Encode(Δ), adds R·Encode(z_{s,j}) in plaintext;
  (c) adds antisymmetric pairwise masks derived from (k_{s,s'}, t) and uploads; the server
      multiplies the uploads (masks cancel), decrypts and decodes: signed value / (R·P).
Encode(x) = round(x·P) (half up), Decode(y) = (y − n if y > n/2 else y)/(R·P).

Speed: c_u^{n_{s,u} r_u R} is one full-size exponentiation per silo and user (k_{s,u}, reused
while c_u is), after which each coordinate costs only short exponents of about log2(P·C) bits;
these are done as one fixed-base windowed product over users (tables per k_{s,u}, shared by all
coordinates), with an offset that makes every exponent non-negative and one inverse per silo
that removes it. gmpy2 is used when installed (about 8× faster than Python ints at 2048 bits).

What differs from the authors' code (reference §7 items 8 and 11) and why:
  * sub-sampling (-ws) works: ciphertexts are per round, unsampled users have β_u = 0 and
    contribute exactly zero; the silos cannot tell who was sampled (Enc(0) looks like Enc(β));
  * Encode rounds exactly with Python integers (the authors truncate through int64, which
    overflows for |x| > 9·10^8 at P = 10^10);
  * PRG streams are SHAKE-256 keyed by a 256-bit SHA-256 digest of (key, label, round); the
    authors cut the seed to 32 bits for numpy's RandomState, which makes the masks guessable;
  * every upload is re-randomised with a fresh r^n: the server made the c_u and knows their
    randomness, so without this the randomness of a decrypted upload is a function of the
    silo's exponents (the encoded deltas);
  * a round index is never reused (reused masks would reveal the difference of two uploads);
  * the plaintext room is checked up front (bits of R, P and the value range against the key).
A deployment passes seed=None (operating-system randomness); a seed makes a simulated
transcript reproducible. The decoded result never depends on the protocol's randomness.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from dpfl.algorithms.uldp.crypto import (
    BACKEND,
    DH_SECRET_BITS,
    MODP_G,
    MODP_P,
    from_bytes,
    invert,
    multi_power,
    num,
    paillier_keypair,
    party_rng,
    powmod,
    prg_stream,
    to_bytes,
)
from dpfl.errors import SpecError

__all__ = [
    "BACKEND",
    "SecureWeighting",
    "SecureWeightingCost",
    "ServerView",
    "encode",
    "fixed_point_weighted_sum",
    "lcm_upto",
]


@dataclass(frozen=True)
class SecureWeightingCost:
    """What the protocol cost. Times are wall-clock seconds of each party's own work, measured
    while the parties run one after another on this machine; bytes are serialised messages.

    "Last round" fields describe the most recent `aggregate` call, `total_*` all rounds so far.
    `encrypt_s` and `broadcast_bytes` are 0 in rounds that reuse the previous ciphertexts
    (no sub-sampling). `headroom_bits` is how many bits the plaintext space has to spare over the
    worst-case aggregate R·(U+S)·(2·P·value_bound + 1).
    """

    key_bits: int
    precision: int
    n_max: int
    r_bits: int
    headroom_bits: float
    backend: str
    setup_s: float
    setup_bytes_per_silo: tuple[int, ...]
    rounds: int = 0
    encrypt_s: float = 0.0
    broadcast_bytes: int = 0
    silo_s: tuple[float, ...] = ()
    aggregate_s: float = 0.0
    bytes_per_silo: int = 0
    total_encrypt_s: float = 0.0
    total_silo_s: tuple[float, ...] = ()
    total_aggregate_s: float = 0.0


@dataclass
class ServerView:
    """Everything the server receives, kept so that what it could learn can be examined.

    `histogram_uploads[s][u]` is b'_{s,u}; `blinded_totals[u]` is B_u = r_u·N_u mod n;
    `round_payloads[s]` is silo s's serialised upload of the last round (d ciphertexts).
    """

    dh_publics: tuple[int, ...] = ()
    seed_ciphertexts: dict[int, bytes] = field(default_factory=dict)
    histogram_uploads: tuple[tuple[int, ...], ...] = ()
    blinded_totals: tuple[int, ...] = ()
    round_payloads: tuple[bytes, ...] = ()


def lcm_upto(n: int) -> int:
    """Returns lcm(1, …, n), the R of the protocol (every N_u ≤ n divides it)."""
    return math.lcm(*range(1, n + 1))


def encode(values: np.ndarray, precision: int) -> list[int]:
    """Returns round(x·P) for every x, exactly (half up), as Python integers.

    x = m·2^k with an integer 53-bit mantissa m, so x·P = m·P·2^k is rounded with integer
    shifts only: |Encode(x) − x·P| ≤ 1/2 for every finite float, however large.
    """
    frac, exp = np.frexp(np.asarray(values, dtype=np.float64).ravel())
    mantissa = np.ldexp(frac, 53).astype(np.int64).tolist()
    shifts = (exp - 53).tolist()
    out = []
    for m, k in zip(mantissa, shifts, strict=True):
        v = m * precision
        out.append(v << k if k >= 0 else (v + (1 << (-k - 1))) >> -k)
    return out


def fixed_point_weighted_sum(
    counts: np.ndarray,
    contributions: Sequence[torch.Tensor] | torch.Tensor,
    noise: Sequence[torch.Tensor] | torch.Tensor,
    *,
    precision: int,
    sampled: np.ndarray | None = None,
) -> torch.Tensor:
    """Returns Σ_s Σ_u (n_{s,u}/N_u)·Encode(x_{s,u})/P + Σ_s Encode(z_s)/P, computed in the clear.

    This is the non-secure fixed-point computation that the protocol reproduces exactly
    (Thm 1): both evaluate the same rational number and round it once to float64.
    """
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts.sum(axis=0) > 0
    if sampled is not None:
        keep &= np.asarray(sampled, dtype=bool)
    totals = counts.sum(axis=0)
    scale = math.lcm(*(int(t) for t in totals[keep])) if keep.any() else 1
    d = int(noise[0].shape[-1])
    acc = [0] * d
    for s in range(counts.shape[0]):
        x = contributions[s].detach().cpu().double().numpy()
        for u in np.flatnonzero(keep & (counts[s] > 0)):
            factor = int(counts[s, u]) * (scale // int(totals[u]))
            acc = [a + factor * e for a, e in zip(acc, encode(x[u], precision), strict=True)]
        z = encode(noise[s].detach().cpu().double().numpy(), precision)
        acc = [a + scale * e for a, e in zip(acc, z, strict=True)]
    return torch.tensor([a / (scale * precision) for a in acc], dtype=torch.float64)


class _Silo:
    """One silo's side of the protocol: its counts, DH key, pair keys, masks and uploads."""

    def __init__(self, index: int, counts: np.ndarray, rng: random.Random):
        self.index, self.counts, self.rng = index, [int(c) for c in counts], rng
        self._dh_secret = rng.getrandbits(DH_SECRET_BITS) | (1 << (DH_SECRET_BITS - 1))
        self.dh_public = pow(MODP_G, self._dh_secret, MODP_P)
        self.pair_keys: dict[int, bytes] = {}
        self.masks_r: list[int] = []
        self._k: tuple[int, list] = (-1, [])  # (ciphertext version, k_{s,u} for users with records)

    def derive_pair_keys(self, publics: Sequence[int]) -> None:
        for other, y in enumerate(publics):
            if other == self.index:
                continue
            if not 1 < y < MODP_P - 1:
                raise RuntimeError(f"silo {other} sent an invalid Diffie–Hellman public key")
            shared = pow(y, self._dh_secret, MODP_P).to_bytes(256, "big")
            lo, hi = sorted((self.index, other))
            self.pair_keys[other] = hashlib.sha256(b"pair|%d|%d|" % (lo, hi) + shared).digest()

    def _pad(self, other: int) -> bytes:
        return hashlib.sha256(self.pair_keys[other] + b"|leader-seed").digest()

    def seed_messages(self) -> dict[int, bytes]:
        """Leader only: ρ encrypted (one-time pad) for every other silo."""
        self._seed = self.rng.getrandbits(256).to_bytes(32, "big")
        return {
            o: bytes(a ^ b for a, b in zip(self._seed, self._pad(o), strict=True)) for o in self.pair_keys
        }

    def receive_seed(self, ciphertext: bytes | None, n: int, users: int) -> None:
        """Recovers ρ (non-leaders) and derives the shared multiplicative masks r_u ∈ Z_n^*."""
        if ciphertext is not None:
            self._seed = bytes(a ^ b for a, b in zip(ciphertext, self._pad(0), strict=True))
        self.masks_r = prg_stream(self._seed, "blinding", -1, users, n)
        if any(math.gcd(r, n) != 1 for r in self.masks_r):
            raise RuntimeError("a blinding mask shares a factor with n (probability ~2^-1000); rerun setup")

    def _pair_mask(self, label: str, round: int, count: int, n: int) -> list[int]:
        """Returns Σ_{s'≠s} ±PRG(k_{s,s'}, label, round) mod n (+ if s < s'), which sums to 0 over silos."""
        total = [0] * count
        for other, key in self.pair_keys.items():
            sign = 1 if self.index < other else -1
            total = [
                t + sign * m for t, m in zip(total, prg_stream(key, label, round, count, n), strict=True)
            ]
        return [t % n for t in total]

    def histogram_upload(self, n: int, width: int) -> bytes:
        masks = self._pair_mask("histogram", -1, len(self.counts), n)
        blinded = [(r * c + m) % n for r, c, m in zip(self.masks_r, self.counts, masks, strict=True)]
        return to_bytes(blinded, width)

    def round_upload(self, *, round, version, ciphertexts, contributions, noise, n, R, P, rerandomize):
        """Returns the serialised Enc(Σ_u w_{s,u}·R·Encode(x_u) + R·Encode(z) + masks) per coordinate."""
        n2, nn = num(n * n), num(n)
        users = [u for u, c in enumerate(self.counts) if c > 0]
        if self._k[0] != version:  # one full-size exponentiation per user, reused with c_u
            exponent = [self.counts[u] * self.masks_r[u] * R % n for u in users]
            self._k = (
                version,
                [powmod(num(ciphertexts[u]), e, n2) for u, e in zip(users, exponent, strict=True)],
            )
        d = noise.shape[0]
        exps = np.array([encode(contributions[u], P) for u in users], dtype=object).reshape(len(users), d)
        if exps.size and max(abs(int(e)) for e in exps.ravel()) < 2**61:
            exps = exps.astype(np.int64)
        acc, offset_power = multi_power(self._k[1], exps, n2)
        unshift = invert(offset_power, n2)
        masks = self._pair_mask("update", round, d, n)
        plain = [(R * z + m) % n for z, m in zip(encode(noise, P), masks, strict=True)]
        out = []
        for a, m in zip(acc, plain, strict=True):
            c = a * unshift % n2 * (1 + nn * m) % n2  # (1 + n)^m = 1 + m·n mod n²
            if rerandomize:
                c = c * powmod(num(self.rng.randrange(1, n)), nn, n2) % n2
            out.append(c)
        return to_bytes(out, (2 * n.bit_length() + 7) // 8)


class _Server:
    """The server's side: the Paillier key, the inverses β_u, the ciphertexts c_u and decryption."""

    def __init__(self, key_bits: int, rng: random.Random):
        self.public, self._private = paillier_keypair(key_bits, rng)
        self.n, self.rng = self.public.n, rng

    def inverses(self, uploads: Sequence[bytes], width: int) -> tuple[list[list[int]], list[int], list[int]]:
        """Returns the uploads b'_{s,u}, the totals B_u = r_u·N_u mod n and β_u = B_u⁻¹ mod n.

        B_u = 0 means N_u = 0 (a user without records): β_u = 0 and the user adds nothing.
        Any other B_u without an inverse would expose a factor of n (probability ~2⁻¹⁰⁰⁰).
        """
        n = self.n
        rows = [from_bytes(p, width) for p in uploads]
        totals = [sum(column) % n for column in zip(*rows, strict=True)]
        betas = []
        for b in totals:
            if b and math.gcd(b, n) != 1:
                raise RuntimeError(
                    "a blinded total shares a factor with n (probability ~2^-1000); rerun setup"
                )
            betas.append(int(invert(b, n)) if b else 0)
        return rows, totals, betas

    def encrypt(self, betas: Sequence[int], width: int) -> bytes:
        """Returns the broadcast {c_u = Enc(β_u)}, each with fresh randomness."""
        cts = [self.public.raw_encrypt(b, r_value=self.rng.randrange(1, self.n)) for b in betas]
        return to_bytes(cts, width)

    def decrypt_sum(self, payloads: Sequence[bytes], width: int) -> list[int]:
        """Returns the signed plaintext of Π_s upload_{s,j} for every coordinate j."""
        n, n2 = self.n, num(self.n * self.n)
        columns = zip(*(from_bytes(p, width) for p in payloads), strict=True)
        out = []
        for column in columns:
            product = num(1)
            for c in column:
                product = product * c % n2
            y = self._private.raw_decrypt(int(product))
            out.append(y - n if y > n // 2 else y)
        return out


class SecureWeighting:
    """ULDP-AVG-w's weighted sum computed by the private weighting protocol (module docstring).

    Construction runs setup (a)–(f); each `aggregate` call runs one round (a)–(c) and returns
    Σ_s Σ_u (n_{s,u}/N_u)·x_{s,u} + Σ_s z_s at fixed-point precision P, equal to
    `fixed_point_weighted_sum` bit for bit. All silos take part in every round.

    Args:
        counts: int [S, U], n_{s,u} = records of user u in silo s; S ≥ 2, N_u ≤ n_max.
        key_bits: Paillier modulus size κ (even, 1024–8192).
        precision: P, an integer-valued scale (1e10: 10⁻¹⁰ resolution per term).
        n_max: R = lcm(1..n_max); None takes max_u N_u, which makes that maximum public.
        value_bound: bound on |x| and |z| per coordinate; the headroom check relies on it and
            `aggregate` refuses values beyond it.
        rerandomize: multiply every upload by a fresh r^n (see the module docstring); False
            only to measure what it costs.
        seed: None for operating-system randomness; an int makes the transcript reproducible.
    """

    def __init__(
        self,
        counts: np.ndarray,
        *,
        key_bits: int = 2048,
        precision: float = 1e10,
        n_max: int | None = None,
        value_bound: float = 1e6,
        rerandomize: bool = True,
        seed: int | None = None,
    ):
        counts = np.asarray(counts)
        if counts.ndim != 2 or not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
            raise ValueError(
                f"counts must be a non-negative integer matrix [silos, users]; got {counts!r:.80}"
            )
        self.counts = counts.astype(np.int64)
        S, U = self.counts.shape
        if S < 2:
            raise SpecError(
                "dataset.silos",
                f"is {S}; the private weighting protocol needs at least two silos (secure aggregation "
                "hides each silo's upload among the others).",
            )
        if not (isinstance(key_bits, int) and key_bits % 2 == 0 and 1024 <= key_bits <= 8192):
            raise SpecError("params.key_bits", f"must be an even integer in [1024, 8192]; got {key_bits!r}.")
        if not (np.isfinite(precision) and precision >= 1 and float(precision).is_integer()):
            raise SpecError(
                "params.precision", f"must be an integer-valued scale ≥ 1 (e.g. 1e10); got {precision!r}."
            )
        if not (np.isfinite(value_bound) and value_bound > 0):
            raise ValueError(f"value_bound must be a positive finite number; got {value_bound!r}")
        totals = self.counts.sum(axis=0)
        largest = int(totals.max()) if U else 0
        n_max = max(largest, 1) if n_max is None else n_max
        if not (isinstance(n_max, int | np.integer) and n_max >= 1):
            raise SpecError("params.n_max", f"must be an integer ≥ 1; got {n_max!r}.")
        if largest > n_max:
            u = int(np.argmax(totals))
            raise SpecError(
                "params.n_max",
                f"is {n_max} but user {u} has {largest} records across the silos (N_u must divide "
                "R = lcm(1..n_max)); cap every user's records at params.n_max before training, as the "
                "paper suggests, or raise params.n_max.",
            )
        self.key_bits, self.precision, self.n_max = key_bits, int(precision), int(n_max)
        self.value_bound, self.rerandomize = float(value_bound), rerandomize
        self.R = lcm_upto(self.n_max)
        self.headroom_bits = self._check_headroom(S, U)

        start = time.perf_counter()
        server = _Server(key_bits, party_rng(seed, "server"))
        n = server.n
        self._width_n, self._width_c = (n.bit_length() + 7) // 8, (2 * n.bit_length() + 7) // 8
        silos = [_Silo(s, self.counts[s], party_rng(seed, f"silo-{s}")) for s in range(S)]
        publics = tuple(silo.dh_public for silo in silos)  # (a) uploaded, (b) relayed by the server
        for silo in silos:
            silo.derive_pair_keys(publics)
        seed_messages = silos[0].seed_messages()  # (c) through the server
        for silo in silos:
            silo.receive_seed(seed_messages.get(silo.index), n, U)  # (d)
        uploads = [silo.histogram_upload(n, self._width_n) for silo in silos]  # (e)
        rows, blinded, self._betas = server.inverses(uploads, self._width_n)  # (f)
        setup_s = time.perf_counter() - start

        self._server, self._silos = server, silos
        self._full: bytes | None = None  # c_u = Enc(β_u) for rounds without sub-sampling
        self._version, self._last_round = 0, None
        self.server_view = ServerView(
            dh_publics=publics,
            seed_ciphertexts=seed_messages,
            histogram_uploads=tuple(tuple(r) for r in rows),
            blinded_totals=tuple(blinded),
        )
        sizes = [(MODP_P.bit_length() + 7) // 8 + len(u) for u in uploads]
        sizes[0] += sum(len(m) for m in seed_messages.values())
        self.cost = SecureWeightingCost(
            key_bits=key_bits,
            precision=self.precision,
            n_max=self.n_max,
            r_bits=self.R.bit_length(),
            headroom_bits=self.headroom_bits,
            backend=BACKEND,
            setup_s=setup_s,
            setup_bytes_per_silo=tuple(sizes),
            total_silo_s=(0.0,) * S,
        )

    @property
    def modulus(self) -> int:
        """Returns the Paillier modulus n (public: every party knows it)."""
        return self._server.n

    def _check_headroom(self, S: int, U: int) -> float:
        """Returns the spare bits of the plaintext space; refuses when the aggregate could wrap.

        |Σ| ≤ R·(U+S)·(P·V + ½): Σ_s w_{s,u} ≤ 1 for each of U users, one noise term per silo,
        each |Encode(v)| ≤ P·V + ½. Decoding is unique while that is below n/2 ≥ 2^(κ−2).
        """
        scaled = 2 * math.ceil(self.precision * self.value_bound) + 1
        worst = self.R * (U + S) * scaled
        headroom = self.key_bits - 1 - math.log2(worst)
        if worst < 2 ** (self.key_bits - 1):
            return headroom
        n_fit, r = 0, 1
        while (r := math.lcm(r, n_fit + 1)) * (U + S) * scaled < 2 ** (self.key_bits - 1):
            n_fit += 1
        need = worst.bit_length() + 1
        raise SpecError(
            "params.n_max",
            f"is {self.n_max}, which needs more plaintext room than a {self.key_bits}-bit Paillier key "
            f"has: R = lcm(1..n_max) takes {self.R.bit_length()} bits, precision {self.precision:.0e} "
            f"and up to {U + S} terms of magnitude ≤ {self.value_bound:g} take "
            f"{math.log2((U + S) * scaled):.1f} bits, {math.log2(worst):.1f} bits in all, and the key "
            f"leaves {self.key_bits - 1}. Lower params.n_max to at most {n_fit} (cap each user's "
            f"records there) or raise params.key_bits to at least {need + need % 2} (e.g. "
            f"{-(-need // 1024) * 1024}).",
        )

    def aggregate(
        self,
        round: int,
        contributions: Sequence[torch.Tensor] | torch.Tensor,
        noise: Sequence[torch.Tensor] | torch.Tensor,
        sampled: np.ndarray | None = None,
    ) -> torch.Tensor:
        """Runs one round and returns Σ_s Σ_u (n_{s,u}/N_u)·x_{s,u} + Σ_s z_s, [d].

        Args:
            round: the round index; strictly larger than any earlier call's (masks derive from it).
            contributions: per silo [U, d], the clipped per-user deltas (rows of users without
                records in the silo are ignored).
            noise: per silo [d], the silo's Gaussian noise z_s.
            sampled: bool [U] for user sub-sampling (unsampled users add exactly 0); None: all.
        Returns:
            The decoded sum, exact to fixed point (|error| ≤ (U+S)/(2P) plus one float64
            rounding), in the dtype of `contributions`.
        """
        xs, zs = self._validate(round, contributions, noise, sampled)
        server, n = self._server, self._server.n
        start = time.perf_counter()
        if sampled is None:
            if self._full is None:
                self._full = server.encrypt(self._betas, self._width_c)
                broadcast_bytes = len(self._full)
            else:
                broadcast_bytes = 0
            broadcast, version = self._full, 0
        else:
            betas = np.where(np.asarray(sampled, dtype=bool), np.array(self._betas, dtype=object), 0)
            broadcast = server.encrypt(betas.tolist(), self._width_c)
            self._version += 1
            broadcast_bytes, version = len(broadcast), self._version
        encrypt_s = time.perf_counter() - start if broadcast_bytes else 0.0

        payloads, silo_s = [], []
        for silo, x, z in zip(self._silos, xs, zs, strict=True):
            start = time.perf_counter()
            ciphertexts = from_bytes(broadcast, self._width_c)
            upload = silo.round_upload(
                round=round,
                version=version,
                ciphertexts=ciphertexts,
                contributions=x,
                noise=z,
                n=n,
                R=self.R,
                P=self.precision,
                rerandomize=self.rerandomize,
            )
            payloads.append(upload)
            silo_s.append(time.perf_counter() - start)

        start = time.perf_counter()
        scale = self.R * self.precision
        values = [y / scale for y in server.decrypt_sum(payloads, self._width_c)]
        aggregate_s = time.perf_counter() - start

        self._last_round = round
        self.server_view.round_payloads = tuple(payloads)
        c = self.cost
        self.cost = replace(
            c,
            rounds=c.rounds + 1,
            encrypt_s=encrypt_s,
            broadcast_bytes=broadcast_bytes,
            silo_s=tuple(silo_s),
            aggregate_s=aggregate_s,
            bytes_per_silo=len(payloads[0]),
            total_encrypt_s=c.total_encrypt_s + encrypt_s,
            total_silo_s=tuple(a + b for a, b in zip(c.total_silo_s, silo_s, strict=True)),
            total_aggregate_s=c.total_aggregate_s + aggregate_s,
        )
        first = contributions[0]
        return torch.tensor(values, dtype=torch.float64).to(dtype=first.dtype, device=first.device)

    def _validate(self, round, contributions, noise, sampled) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Returns the contributions [U, d] and noise [d] per silo as float64 arrays, checked."""
        S, U = self.counts.shape
        if self._last_round is not None and round <= self._last_round:
            raise ValueError(
                f"round {round} comes after round {self._last_round}; each round needs a new, larger "
                "index, because reusing one reuses the secure-aggregation masks"
            )
        if len(contributions) != S or len(noise) != S:
            raise ValueError(
                f"expected {S} silos' contributions and noise; got {len(contributions)} and {len(noise)}"
            )
        xs = [c.detach().cpu().double().numpy() for c in contributions]
        zs = [z.detach().cpu().double().numpy() for z in noise]
        d = zs[0].shape[-1] if zs[0].ndim == 1 else -1
        for s in range(S):
            if xs[s].shape != (U, d) or zs[s].shape != (d,):
                raise ValueError(
                    f"silo {s}: contributions must be [U={U}, d] and noise [d] with one d; got "
                    f"{tuple(xs[s].shape)} and {tuple(zs[s].shape)}"
                )
            used = np.concatenate([xs[s][self.counts[s] > 0].ravel(), zs[s]])
            worst = float(np.max(np.abs(used))) if used.size else 0.0
            if not worst <= self.value_bound:  # also catches NaN
                raise ValueError(
                    f"silo {s} sends a value of magnitude {worst:g}, beyond value_bound="
                    f"{self.value_bound:g}; clip the contributions, or raise value_bound (log2 of the "
                    "increase costs that many bits of headroom)"
                )
        if sampled is not None and np.asarray(sampled).shape != (U,):
            raise ValueError(f"sampled must be a bool array [U={U}]; got shape {np.asarray(sampled).shape}")
        return xs, zs
