"""Derived seeds: every random choice gets its own seed, computed from the root seed and names.

Deriving (rather than drawing) seeds keeps results independent of execution order: fold 3 of a
model gets the same seed whether it runs alone on a cluster node or after fold 2 on a laptop.
"""

from __future__ import annotations

import hashlib


def derive_seed(root_seed: int, *names: object) -> int:
    """A 31-bit seed determined by the root seed and the names (stable across runs and machines)."""
    text = "/".join([str(root_seed), *map(str, names)])
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFF_FFFF
