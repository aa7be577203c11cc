"""Number theory and byte plumbing of the private weighting protocol (`secure`).

Big-integer arithmetic (gmpy2 when installed, Python ints otherwise), the RFC 3526 group for
Diffie–Hellman, Paillier key generation with a party's own randomness, the keyed PRG streams of
masks, fixed-width serialisation, and the fixed-base multi-exponentiation that makes a silo's
upload cost ⌈L/w⌉ products per user and coordinate instead of a full modular power.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import numpy as np
import phe.util
from phe import paillier

__all__ = [
    "BACKEND",
    "DH_SECRET_BITS",
    "MODP_G",
    "MODP_P",
    "from_bytes",
    "invert",
    "multi_power",
    "num",
    "paillier_keypair",
    "party_rng",
    "powmod",
    "prg_stream",
    "to_bytes",
]

try:  # optional accelerator; phe picks it up too
    import gmpy2
except ImportError:  # pragma: no cover - depends on the environment
    gmpy2 = None


BACKEND = "gmpy2" if gmpy2 is not None else "python"
if gmpy2 is not None:
    num, powmod, invert = gmpy2.mpz, gmpy2.powmod, gmpy2.invert
else:  # pragma: no cover - depends on the environment
    num = int

    def powmod(base: int, exponent: int, modulus: int) -> int:
        return pow(base, exponent, modulus)

    def invert(value: int, modulus: int) -> int:
        return pow(value, -1, modulus)


# RFC 3526 §3, the 2048-bit MODP group (id 14), generator 2: a safe prime, 112-bit security.
MODP_P = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
    "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
    "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836"
    "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804"
    "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6"
    "955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
MODP_G = 2
DH_SECRET_BITS = 320  # > 2 × the group's 112-bit strength (RFC 3526 §8)


def prg_stream(key: bytes, label: str, round: int, count: int, modulus: int) -> list[int]:
    """Returns `count` PRG elements of Z_modulus from (key, label, round).

    SHAKE-256 keyed by SHA-256(key, label, round); each element takes 128 bits beyond the
    modulus before reduction, so the stream is within count·2⁻¹²⁸ of uniform.
    """
    seed = hashlib.sha256(b"dpfl-uldp|%s|%s|%d" % (key, label.encode(), round)).digest()
    width = (modulus.bit_length() + 128 + 7) // 8
    raw = hashlib.shake_256(seed).digest(count * width)
    return [int.from_bytes(raw[i * width : (i + 1) * width], "big") % modulus for i in range(count)]


def party_rng(seed: int | None, party: str) -> random.Random:
    """Returns a party's own randomness: the OS's, or a reproducible stream for a simulation."""
    return random.SystemRandom() if seed is None else random.Random(f"{seed}/{party}")


def _prime(bits: int, rng: random.Random) -> int:
    """Returns a random prime of exactly `bits` bits with its top two bits set."""
    while True:
        start = rng.getrandbits(bits) | (3 << (bits - 2)) | 1
        if gmpy2 is not None:
            p = int(gmpy2.next_prime(start))
        else:
            p = start
            while not phe.util.is_prime(p):
                p += 2
        if p.bit_length() == bits:
            return p


def paillier_keypair(bits: int, rng: random.Random):
    """Returns a Paillier key pair whose modulus has exactly `bits` bits."""
    while True:
        p, q = _prime(bits // 2, rng), _prime(bits // 2, rng)
        if p != q and (p * q).bit_length() == bits:
            public = paillier.PaillierPublicKey(p * q)
            return public, paillier.PaillierPrivateKey(public, p, q)


def to_bytes(values: Sequence[int], width: int) -> bytes:
    return b"".join(int(v).to_bytes(width, "big") for v in values)


def from_bytes(payload: bytes, width: int) -> list[int]:
    return [int.from_bytes(payload[i : i + width], "big") for i in range(0, len(payload), width)]


def _window(bits: int, coordinates: int) -> int:
    """Returns the window w minimising a fixed-base table's cost: ⌈L/w⌉·(2^w − 1 + d) products."""
    return min(range(1, 13), key=lambda w: -(-bits // w) * ((1 << w) - 1 + coordinates))


def multi_power(bases: list, exponents: np.ndarray, n2) -> tuple[list, int]:
    """Returns (Π_u bases[u]^(e_{u,j} + O) mod n² for every column j, Π_u bases[u]^O) with
    O = 2^(L−1) chosen so that every shifted exponent lies in [1, 2^L).

    Fixed-base windows: for each base, the powers base^(m·2^(w·i)) are tabulated once and
    shared by all columns, so a column costs ⌈L/w⌉ products per base instead of a full pow.
    """
    users, d = len(bases), exponents.shape[1]
    bits = max((int(abs(e)) for e in exponents.ravel()), default=0).bit_length() + 1
    shifted = exponents + (1 << (bits - 1))
    w = _window(bits, d)
    windows, mask = -(-bits // w), (1 << w) - 1
    acc, offset_power = [num(1)] * d, num(1)
    for u in range(users):
        base = bases[u]
        for i in range(windows):
            table = [num(1), base]
            for _ in range(mask - 1):
                table.append(table[-1] * base % n2)
            digits = ((shifted[u] >> (w * i)) & mask).tolist()
            acc = [a * table[g] % n2 if g else a for a, g in zip(acc, digits, strict=True)]
            if i == (bits - 1) // w:
                offset_power = offset_power * table[1 << ((bits - 1) % w)] % n2
            base = table[-1] * base % n2
    return acc, offset_power
