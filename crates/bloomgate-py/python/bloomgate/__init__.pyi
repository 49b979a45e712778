"""Type stubs of the bloomgate extension module (see the module docstring for key encoding and
thread safety)."""

import os
from typing import Any, Iterable, List, Literal, Optional, TypeVar, Union

Key = Union[str, bytes, bytearray, memoryview, int]
"""str hashes as UTF-8; bytes-like as is; int in [-2**63, 2**63) as its 8-byte little-endian
two's complement, any other int as ``n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)``."""

Buffer = Union[bytes, bytearray, memoryview]
PathLike = Union[str, "os.PathLike[str]"]
_F = TypeVar("_F", bound="_Filter")

class FilterFullError(Exception):
    """A cuckoo filter found no room for a key; nothing stored before was lost."""

class _Filter:
    """Methods every filter class has."""

    def __contains__(self, key: Key) -> bool: ...
    def might_contain(self, key: Key) -> bool:
        """Same as ``key in f``: False means definitely absent."""
    def contains_many(self, keys: Iterable[Key]) -> List[bool]:
        """``key in f`` for every key, GIL released while probing. Given a NumPy array (typed
        here as an iterable), returns a NumPy bool array of the same shape."""
    def __len__(self) -> int: ...
    def estimated_fpr(self) -> float:
        """False-positive rate the filter has now, from its actual contents."""
    @property
    def nbytes(self) -> int:
        """Bytes of memory the filter uses."""
    @property
    def seed(self) -> int:
        """The XXH3-128 seed (stored in the file)."""
    def save(self, path: PathLike) -> None:
        """Writes the bloomgate file format atomically (readable by ``bloomgate`` CLI and server)."""
    @classmethod
    def load(cls: type[_F], path: PathLike) -> _F:
        """Reads a file from ``save`` or ``bloomgate build``; ValueError if corrupt or of another kind."""
    def to_bytes(self) -> bytes: ...
    @classmethod
    def from_bytes(cls: type[_F], data: Buffer) -> _F: ...
    def copy(self: _F) -> _F: ...
    def __copy__(self: _F) -> _F: ...
    def __deepcopy__(self: _F, memo: Any) -> _F: ...
    def update(self, keys: Iterable[Key]) -> None: ...

class _BloomFamily(_Filter):
    """Methods of the Bloom-family filters (all but the cuckoo filter)."""

    def add(self, key: Key) -> bool:
        """Adds ``key``; True if it was new."""
    @property
    def fpr(self) -> float:
        """The false-positive rate the filter is sized for (fixed-size ones: the model's rate at
        ``capacity`` items)."""

class _BitArray(_BloomFamily):
    """Methods of the fixed-size filters of ``bits`` bits or counters probed ``hashes`` times."""

    @property
    def bits(self) -> int: ...
    @property
    def hashes(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    def clear(self) -> None: ...

class BloomFilter(_BitArray):
    """A Bloom filter sized for ``expected_items`` at ``fpr``, classic, cache-line blocked or FastLocal."""

    def __init__(
        self,
        expected_items: int,
        fpr: float,
        *,
        layout: Literal["classic", "blocked", "fastlocal"] = "classic",
        seed: int = 0,
    ) -> None: ...
    @staticmethod
    def with_bits(
        bits: int,
        hashes: int,
        *,
        layout: Literal["classic", "blocked", "fastlocal"] = "classic",
        seed: int = 0,
        expected_items: Optional[int] = None,
    ) -> "BloomFilter": ...
    def estimated_len(self) -> float: ...
    @property
    def fill_ratio(self) -> float: ...
    @property
    def layout(self) -> Literal["classic", "blocked", "fastlocal"]: ...
    def union(self, other: "BloomFilter") -> "BloomFilter": ...
    def intersection(self, other: "BloomFilter") -> "BloomFilter": ...
    def __or__(self, other: "BloomFilter") -> "BloomFilter": ...
    def __and__(self, other: "BloomFilter") -> "BloomFilter": ...
    def __ior__(self, other: "BloomFilter") -> "BloomFilter": ...
    def __iand__(self, other: "BloomFilter") -> "BloomFilter": ...

class CountingBloomFilter(_BitArray):
    """4-bit counters: can ``remove`` keys (only remove keys you added)."""

    def __init__(self, expected_items: int, fpr: float, *, seed: int = 0) -> None: ...
    def remove(self, key: Key) -> None:
        """KeyError (and no change) if ``key`` is definitely absent."""
    def count(self, key: Key) -> int: ...
    def to_bloom(self) -> BloomFilter: ...

class ScalableBloomFilter(_BloomFamily):
    """Grows past ``initial_capacity``; the false-positive rate stays below ``fpr``."""

    def __init__(
        self,
        initial_capacity: int,
        fpr: float,
        *,
        growth: int = 2,
        tightening: float = 0.5,
        seed: int = 0,
    ) -> None: ...
    @property
    def links(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def initial_capacity(self) -> int: ...
    @property
    def growth(self) -> int: ...
    @property
    def tightening(self) -> float: ...
    def fpr_bound(self) -> float: ...

class CuckooFilter(_Filter):
    """Removes and counts keys; ``add`` raises FilterFullError when no room is left."""

    def __init__(self, capacity: int, fpr: float, *, seed: int = 0) -> None: ...
    def add(self, key: Key) -> None: ...
    def remove(self, key: Key) -> None: ...
    def count(self, key: Key) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def load_factor(self) -> float: ...
    @property
    def buckets(self) -> int: ...
    @property
    def fingerprint_bits(self) -> int: ...
    def clear(self) -> None: ...

class WindowedBloomFilter(_BloomFamily):
    """Generations of aligned time slots that forget old keys; times in ms (None: the wall clock)."""

    def __init__(
        self,
        generations: int,
        items_per_generation: int,
        fpr: float,
        *,
        window_ms: Optional[int] = None,
        seed: int = 0,
        now_ms: Optional[int] = None,
    ) -> None: ...
    def add(self, key: Key, now_ms: Optional[int] = None) -> bool: ...
    def update(self, keys: Iterable[Key], now_ms: Optional[int] = None) -> None: ...
    def rotate(self, now_ms: Optional[int] = None) -> None: ...
    def rotate_if_due(self, now_ms: Optional[int] = None) -> bool: ...
    @property
    def generations(self) -> int: ...
    @property
    def items_per_generation(self) -> int: ...
    @property
    def window_ms(self) -> Optional[int]: ...
    @property
    def newest_len(self) -> int: ...

AnyFilter = Union[BloomFilter, CountingBloomFilter, ScalableBloomFilter, CuckooFilter, WindowedBloomFilter]

def load(path: PathLike) -> AnyFilter:
    """Opens a filter file of any kind as its class."""

def from_bytes(data: Buffer) -> AnyFilter:
    """Parses a filter image of any kind as its class."""

__all__ = [
    "BloomFilter",
    "CountingBloomFilter",
    "CuckooFilter",
    "FilterFullError",
    "ScalableBloomFilter",
    "WindowedBloomFilter",
    "from_bytes",
    "load",
]
