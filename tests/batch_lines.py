"""Input lines of every kind for batch tests and fuzzing: good sentences, and each bad kind found so far."""

from __future__ import annotations

import json
import random

BAD_KINDS: dict[str, bytes] = {
    "surrogate": b'{"text": "bank \\ud800"}',
    "id-2^64": b'{"id": 18446744073709551616, "text": "the bank"}',
    "nested-1000": b'{"text": ' + b"[" * 1000 + b"]" * 1000 + b"}",
    "nested-100000": b"{" * 100_000,
    "id-nested": b'{"id": ' + b"[" * 300 + b"]" * 300 + b', "text": "the bank"}',
    "invalid-utf8": b"caf\xe9 \xff\xfe bank",
    "control": b"\x00\x01\x1b[31m bank",
    "huge-line": b"the bank " * 120_000,  # ~1 MB: past the default 512 KiB line limit
    "too-many-tokens": b"the bank " * 600,
    "not-object": b'["the bank"]',
    "no-text": b'{"id": 3}',
    "text-not-string": b'{"text": 5}',
    "bad-json": b"{not json",
    "empty": b"",
    "cr": b"\r",
    "bom": b"\xef\xbb\xbfthe bank",
    "oov": b"xqzzv qqxj",
    "nan-id": b'{"id": NaN, "text": "the bank"}',
}
GOOD = [b"we sat on the river bank", b"I deposited money in the bank", b'{"id": "q", "text": "the money bank"}']


def random_line(rng: random.Random) -> bytes:
    """One line without a newline: a good sentence, a known bad kind, random bytes or random JSON."""
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(GOOD)
    if roll < 0.65:
        return rng.choice(list(BAD_KINDS.values()))
    if roll < 0.85:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(60))).replace(b"\n", b" ")
    text = rng.choice(["the bank", "", "\ud800", 5, None])
    value = {"text": text, "id": rng.choice([1, 2**70, -(2**70), "x", [1], None])}
    return json.dumps(value).encode("utf-8", "surrogatepass")
