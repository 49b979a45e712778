"""bloomgate: Bloom filters whose files the ``bloomgate`` CLI and server share.

Keys are ``str`` (hashed as UTF-8), ``bytes``/``bytearray``/``memoryview`` (as is) or ``int``
(in [-2**63, 2**63): its 8-byte little-endian two's complement; otherwise
``n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)``), hashed with XXH3-128, so a
key answers the same in Python, in the CLI and in Rust.

Every filter is safe to share between threads: queries take a shared lock, inserts an exclusive
one; batch calls (``update``, ``contains_many``, ``save``, ``load``) release the GIL while they
hash and probe.

``Gate`` is the membership gate (per-user filters in front of an exact store: SQLite, Redis or
PostgreSQL) that ``bloomgate serve``'s ``GATE.*`` commands also run; see its docstring.
"""

from . import _bloomgate
from ._bloomgate import (
    BloomFilter,
    CountingBloomFilter,
    CuckooFilter,
    FilterFullError,
    Gate,
    GateError,
    ScalableBloomFilter,
    WindowedBloomFilter,
    from_bytes,
    load,
)

# The extension lists the names it registers; the stub (__init__.pyi) states the same list
# statically for type checkers.
__all__ = sorted(_bloomgate.__all__)
