"""The Python API of every filter class: construction, keys, sizes, set operations, copies."""

import copy
import pickle

import pytest

import bloomgate
from bloomgate import (
    BloomFilter,
    CountingBloomFilter,
    CuckooFilter,
    ScalableBloomFilter,
    WindowedBloomFilter,
)


@pytest.mark.parametrize("layout", ["classic", "blocked", "fastlocal"])
def test_bloom_basics(layout):
    f = BloomFilter(1000, 0.01, layout=layout)
    assert f.layout == layout
    assert len(f) == 0
    assert f.add("alice") is True
    assert f.add("alice") is False
    assert "alice" in f
    assert f.might_contain("alice")
    assert "bob" not in f
    assert len(f) == 1
    assert f.capacity == 1000
    assert f.bits % (64 if layout == "classic" else 512) == 0
    assert f.hashes >= 1
    assert f.nbytes >= f.bits // 8
    assert 0 < f.fill_ratio < 0.01
    assert 0.005 < f.fpr <= 0.01
    assert f.estimated_fpr() < 1e-6
    assert 0.5 < f.estimated_len() < 1.5
    assert f.seed == 0
    assert "BloomFilter(" in repr(f)


def test_classic_sizing_matches_the_model():
    f = BloomFilter(1_000_000, 0.01)
    assert f.hashes == 7
    assert 9.5 < f.bits / 1_000_000 < 9.7  # 9.585 bits/key at 1%


def test_keys_of_every_type():
    f = BloomFilter(1000, 0.001)
    keys = ["héllo", b"raw", bytearray(b"mutable"), memoryview(b"view"), 0, -1, 2**63 - 1,
            -(2**63), 2**63, 2**200, -(2**200), True]
    for k in keys:
        f.add(k)
    for k in keys:
        assert k in f
    # Same bytes, same key, whatever the type.
    assert b"h\xc3\xa9llo" in f
    assert "raw" in f
    assert (0).to_bytes(8, "little") in f
    assert (2**63).to_bytes(9, "little", signed=True) in f
    assert (2**200).to_bytes(26, "little", signed=True) in f
    assert 1 in f  # True is the int 1


def test_int_encoding_is_documented_bytes():
    f = BloomFilter(1000, 0.001)
    for n in [5, -5, 2**40]:
        f.add(n.to_bytes(8, "little", signed=True))
        assert n in f
    assert 6 not in f


def test_update_and_contains_many():
    f = BloomFilter(10_000, 0.01)
    f.update(f"k{i}" for i in range(5000))
    assert len(f) >= 4990
    assert f.contains_many([f"k{i}" for i in range(5000)]) == [True] * 5000
    got = f.contains_many((f"absent{i}" for i in range(5000)))
    assert isinstance(got, list) and sum(got) < 150
    f.update((b"a", b"b"))
    assert f.contains_many((b"a", b"b")) == [True, True]
    assert f.contains_many([]) == []


def test_contains_many_of_a_mixed_list_matches_single_queries():
    class Name(str):
        pass

    f = BloomFilter(10_000, 0.001)
    present = ["ascii", "ünïcødé", "😀", Name("subclass"), b"raw", bytearray(b"ba"), 7, -2**70, ""]
    f.update(present)
    absent = ["nope", Name("also-not"), b"none", 8, 2**70]
    mixed = [k for pair in zip(present, absent) for k in pair] + present[len(absent):]
    assert f.contains_many(mixed) == [k in f for k in mixed]
    assert all(f.contains_many(present)) and f.contains_many(present) == [True] * len(present)
    # A str key and its UTF-8 bytes are one key, in a batch as alone.
    assert f.contains_many(["ünïcødé".encode(), Name("ascii")]) == [True, True]
    # Results of every mix of hits and misses, either side of the majority.
    for hits in (0, 1, 2, 3, 4):
        keys = present[:hits] + absent[: 4 - hits]
        assert f.contains_many(keys) == [True] * hits + [k in f for k in absent[: 4 - hits]]


def test_numpy_arrays_give_numpy_bools():
    np = pytest.importorskip("numpy")
    f = BloomFilter(10_000, 0.01, layout="blocked")
    f.update(np.arange(1000, dtype=np.int64))
    assert all(i in f for i in range(1000))  # int64 array items are the int keys
    got = f.contains_many(np.arange(1000, dtype=np.int32).reshape(10, 100))
    assert isinstance(got, np.ndarray) and got.dtype == np.bool_ and got.shape == (10, 100)
    assert got.all()
    words = np.array(["x", "y", "z"])
    f.update(words)
    assert f.contains_many(words).tolist() == [True, True, True]
    assert f.contains_many(np.array([b"x", b"q"])).tolist() == [True, False]
    assert f.contains_many(np.array(["x", 70_000], dtype=object)).tolist() == [True, False]


@pytest.mark.parametrize("layout", ["classic", "blocked", "fastlocal"])
def test_union_and_intersection(layout):
    a = BloomFilter(1000, 0.01, layout=layout)
    b = BloomFilter(1000, 0.01, layout=layout)
    a.update(["a", "both"])
    b.update(["b", "both"])
    u = a | b
    assert all(k in u for k in ["a", "b", "both"])
    assert a.union(b).to_bytes() == u.to_bytes()
    i = a & b
    assert "both" in i and "a" not in i and "b" not in i
    assert a.intersection(b).to_bytes() == i.to_bytes()
    assert "b" not in a  # operators return new filters
    a |= b
    assert "b" in a
    a &= a
    assert "b" in a
    a.clear()
    assert len(a) == 0 and "both" not in a


def test_incompatible_filters_are_value_errors():
    a = BloomFilter(1000, 0.01)
    with pytest.raises(ValueError, match="incompatible"):
        a | BloomFilter(2000, 0.01)
    with pytest.raises(ValueError, match="incompatible"):
        a | BloomFilter(1000, 0.01, seed=1)
    with pytest.raises(ValueError, match="incompatible"):
        a & BloomFilter(1000, 0.01, layout="blocked")
    with pytest.raises(ValueError, match="a blocked and a fastlocal filter"):
        BloomFilter(1000, 0.01, layout="blocked") | BloomFilter(1000, 0.01, layout="fastlocal")
    with pytest.raises(TypeError):
        a | {"a"}


def test_with_bits():
    f = BloomFilter.with_bits(8192, 3)
    assert f.bits == 8192 and f.hashes == 3 and f.capacity == round(8192 * 0.6931 / 3)
    g = BloomFilter.with_bits(1000, 4, layout="blocked", expected_items=50)
    assert g.bits == 1024 and g.capacity == 50


@pytest.mark.parametrize(
    "make",
    [
        lambda: BloomFilter(1000, 0.01),
        lambda: BloomFilter(1000, 0.01, layout="blocked", seed=7),
        lambda: CountingBloomFilter(1000, 0.01),
        lambda: ScalableBloomFilter(100, 0.01),
        lambda: CuckooFilter(1000, 0.01),
        lambda: WindowedBloomFilter(3, 1000, 0.01, window_ms=60_000, now_ms=1000),
    ],
)
def test_round_trips(make, tmp_path):
    f = make()
    f.update([f"key{i}" for i in range(500)])
    image = f.to_bytes()
    for g in [
        type(f).from_bytes(image),
        type(f).from_bytes(bytearray(image)),
        type(f).from_bytes(memoryview(image)),
        bloomgate.from_bytes(image),
        pickle.loads(pickle.dumps(f)),
        copy.copy(f),
        copy.deepcopy(f),
        f.copy(),
    ]:
        assert type(g) is type(f)
        assert g.to_bytes() == image
        assert len(g) == len(f)
        assert g.seed == f.seed
    path = tmp_path / "f.bgf"
    f.save(path)
    assert path.read_bytes() == image
    assert type(f).load(path).to_bytes() == image
    assert type(bloomgate.load(str(path))) is type(f)
    copied = f.copy()
    copied.add("only-in-copy")
    assert f.to_bytes() == image


def test_counting_filter():
    f = CountingBloomFilter(1000, 0.01)
    assert f.add("a") is True
    f.add("a")
    assert f.count("a") >= 2
    f.remove("a")
    assert "a" in f
    f.remove("a")
    assert "a" not in f
    with pytest.raises(KeyError):
        f.remove("a")
    f.update(["x", "y"])
    b = f.to_bloom()
    assert isinstance(b, BloomFilter) and "x" in b and "y" in b
    assert f.bits == b.bits and f.hashes == 7 and f.capacity == 1000
    assert "CountingBloomFilter(" in repr(f)


def test_scalable_filter_grows_and_keeps_its_bound():
    f = ScalableBloomFilter(100, 0.01)
    assert f.links == 1 and f.initial_capacity == 100 and f.growth == 2
    f.update(range(5000))
    assert f.links > 1 and f.capacity >= 5000
    assert all(f.contains_many(range(5000)))
    assert f.fpr_bound() <= 0.01 and f.fpr == 0.01
    assert f.add(10**6) is True


def test_cuckoo_filter():
    f = CuckooFilter(100, 0.01)
    f.add("a")
    f.add("a")
    assert f.count("a") == 2
    f.remove("a")
    assert f.count("a") == 1 and "a" in f
    f.remove("a")
    assert "a" not in f
    with pytest.raises(KeyError):
        f.remove("a")
    assert f.fingerprint_bits == 10 and f.capacity == 4 * f.buckets
    with pytest.raises(bloomgate.FilterFullError):
        for i in range(10_000):
            f.add(i)
    assert 0.9 < f.load_factor <= 1.0
    stored = len(f)
    with pytest.raises(bloomgate.FilterFullError):
        f.update(range(10_000, 10_100))
    assert len(f) == stored  # a full table takes nothing more and loses nothing
    assert all(f.contains_many(range(stored)))


def test_windowed_filter_forgets_by_age():
    w = WindowedBloomFilter(3, 1000, 0.01, window_ms=1000, now_ms=0)
    assert w.generations == 3 and w.window_ms == 1000 and w.items_per_generation == 1000
    assert w.add("old", now_ms=0) is True
    w.add("mid", now_ms=1500)
    w.update(["new"], now_ms=2500)
    assert all(w.contains_many(["old", "mid", "new"]))
    assert w.newest_len == 1
    assert w.rotate_if_due(3000) is True
    assert "old" not in w and "mid" in w and "new" in w
    w.rotate(now_ms=3100)
    assert "mid" not in w and "new" in w


def test_windowed_filter_uses_the_wall_clock_by_default():
    w = WindowedBloomFilter(2, 100, 0.01, window_ms=3_600_000)
    w.add("k")
    assert w.rotate_if_due() is False
    assert "k" in w
    w.rotate()
    w.rotate()
    assert "k" not in w
