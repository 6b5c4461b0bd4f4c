"""The split: a key's side, drawn from its hash (and the salt)."""

from __future__ import annotations

import hashlib

from stream_app.datasets.options import Split


def split_of(split_key: str, eval_fraction: float | None, salt: str = "") -> Split:
    """``eval`` for a key whose hash falls below the fraction, else ``train``: the first 8
    bytes of the SHA-256 of the UTF-8 key (after ``salt`` and a NUL, when there is a salt),
    big-endian, over 2**64. The same key always lands on the same side, whatever else the
    input holds; another salt draws another split."""
    if eval_fraction is None:
        return "all"
    data = split_key.encode("utf-8", "surrogatepass")
    if salt:
        data = salt.encode("utf-8", "surrogatepass") + b"\0" + data
    digest = hashlib.sha256(data).digest()
    return "eval" if int.from_bytes(digest[:8], "big") / 2**64 < eval_fraction else "train"
