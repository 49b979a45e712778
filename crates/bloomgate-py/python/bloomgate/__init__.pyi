"""Type stubs of the bloomgate extension module (see the module docstring for key encoding and
thread safety)."""

import os
from typing import Any, Iterable, List, Literal, Optional, TypedDict, TypeVar, Union

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

Id = Union[int, str, bytes, bytearray, memoryview]
"""A scope or item of the gate: an int in [0, 2**64) (or an integer type with ``__index__``, as
NumPy's) is that 64-bit id; str (as UTF-8) and
bytes-like are a canonical decimal's number, else their XXH3-64 hash with the fixed seed (the ids
``bloomgate serve``'s ``GATE.*``, the CLI and the Rust API use)."""

class GateError(Exception):
    """The gate's store or filters failed (the message is the gate's), or the gate is closed or
    was created in another process (a forked child)."""

class GateStats(TypedDict):
    """What ``Gate.stats`` returns (counters since the gate opened)."""

    policy: Literal["verify", "trust", "exact"]
    store: str
    requests: int
    candidates: int
    store_lookups: int
    """Candidates sent to the exact path (the cache, then the store)."""
    filter_negatives: int
    """Candidates the filter answered "not seen" without the exact path."""
    filter_maybe: int
    cache_hits: int
    store_reads: int
    history_loads: int
    recorded_rows: int
    record_batches: int
    filter_errors: int
    filter_memory_bytes: int

class Gate:
    """Per-scope (per-user) time-windowed Bloom filters in front of an exact store: "has this
    user already been shown these items?". Safe to share between threads; the GIL is released
    during store and filter work. Not usable in a forked child (GateError): open a new one there.

    ``store``: ``sqlite:PATH``, ``redis://HOST:PORT[/DB]`` or ``postgres://USER@HOST:PORT/DB[?...]``.
    ``policy``: ``verify`` (a filter "maybe" is checked against the store: exact answers),
    ``trust`` (a "maybe" counts as seen) or ``exact`` (no filters). ``filters``: ``local``,
    ``resp://HOST:PORT`` or ``redis+cluster://HOST:PORT[,...]``. ``window_days``: how long an item
    counts as seen. ``memory_kib``: all filters' memory budget. ``filter_dir``: persist local
    filters there across restarts. ``fpr``: each scope filter's false-positive rate.
    ``key_prefix``: the Redis store's and remote filters' keys start with it."""

    def __init__(
        self,
        store: str,
        policy: Literal["verify", "trust", "exact"] = "verify",
        filters: str = "local",
        window_days: float = 30.0,
        memory_kib: int = 262144,
        filter_dir: Optional[PathLike] = None,
        *,
        fpr: float = 0.01,
        key_prefix: str = "bloomgate:gate:",
    ) -> None: ...
    def unseen(self, scope: Id, candidates: Iterable[Id], now_ms: Optional[int] = None) -> List[bool]:
        """Per candidate: True if ``scope`` was not shown it within the window. A store failure
        raises GateError, never reads as "not seen"."""
    def record(
        self, scope: Id, shown: Iterable[Id], now_ms: Optional[int] = None, *, durable: bool = False
    ) -> int:
        """Records what ``scope`` was shown; group-committed to the store in the background.
        Returns how many items were taken (fewer than given only while the store is down and
        the recorder's queue is full: the rest were not recorded). By default it returns once
        they are queued: a crash before their commit loses them (normally the last few
        milliseconds of records; during a store outage, all since it began). ``durable=True``
        returns once the group commit holding them succeeded (shared with concurrent callers)
        and raises GateError if it fails: they stay queued, and recording them again is safe."""
    def expire(self, now_ms: Optional[int] = None) -> int:
        """Drops the store's rows older than the window; returns how many."""
    def flush(self) -> None:
        """Waits until every recorded item is committed and every queued filter build installed."""
    def stats(self) -> GateStats: ...
    def metrics(self) -> str:
        """The gate's metrics in Prometheus text exposition format."""
    def close(self) -> None:
        """Commits what is recorded, stops the gate's threads, writes the filters' snapshot."""
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "Gate": ...
    def __exit__(self, *exc: Any) -> bool: ...

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
    "Gate",
    "GateError",
    "ScalableBloomFilter",
    "WindowedBloomFilter",
    "from_bytes",
    "load",
]
