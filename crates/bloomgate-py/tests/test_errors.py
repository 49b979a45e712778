"""Bad input gets a clear Python exception: TypeError for keys, ValueError for parameters and
corrupt data, never a crash."""

import re

import pytest

import bloomgate
from bloomgate import (
    BloomFilter,
    CountingBloomFilter,
    CuckooFilter,
    ScalableBloomFilter,
    WindowedBloomFilter,
)


@pytest.mark.parametrize("bad", [1.5, None, ["a"], ("a",), {"a": 1}, object(), 3j])
def test_unsupported_key_types(bad):
    f = BloomFilter(100, 0.01)
    for op in [f.add, f.might_contain, f.__contains__]:
        with pytest.raises(TypeError, match="a key must be str, bytes, bytearray, memoryview or int"):
            op(bad)
    with pytest.raises(TypeError):
        f.update(["ok", bad])
    with pytest.raises(TypeError):
        f.contains_many([bad])


def test_a_single_str_is_not_an_iterable_of_keys():
    f = BloomFilter(100, 0.01)
    with pytest.raises(TypeError, match="single str/bytes key"):
        f.update("abc")
    with pytest.raises(TypeError, match="single str/bytes key"):
        f.contains_many(b"abc")
    with pytest.raises(TypeError):
        f.update(5)


def test_lone_surrogate_is_an_error_not_a_crash():
    f = BloomFilter(100, 0.01)
    with pytest.raises(UnicodeEncodeError):
        f.add("\udc80")
    with pytest.raises(UnicodeEncodeError):
        f.contains_many(["ok", "\ud800"])


@pytest.mark.parametrize(
    "make",
    [
        lambda: BloomFilter(0, 0.01),
        lambda: BloomFilter(-5, 0.01),
        lambda: BloomFilter(2**64, 0.01),
        lambda: BloomFilter(100, 0.0),
        lambda: BloomFilter(100, 1.0),
        lambda: BloomFilter(100, float("nan")),
        lambda: BloomFilter(100, 0.01, layout="split"),
        lambda: BloomFilter(10**18, 1e-9),
        lambda: BloomFilter.with_bits(0, 3),
        lambda: BloomFilter.with_bits(1024, 0),
        lambda: BloomFilter.with_bits(1024, 65),
        lambda: CountingBloomFilter(0, 0.01),
        lambda: CountingBloomFilter(100, 2.0),
        lambda: ScalableBloomFilter(100, 0.01, growth=0),
        lambda: ScalableBloomFilter(100, 0.01, tightening=1.0),
        lambda: CuckooFilter(0, 0.01),
        lambda: CuckooFilter(100, 1e-12),
        lambda: WindowedBloomFilter(1, 100, 0.01),
        lambda: WindowedBloomFilter(3, 100, 0.01, window_ms=0),
        lambda: WindowedBloomFilter(3, 0, 0.01),
    ],
)
def test_bad_parameters_are_value_errors(make):
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize(
    "make",
    [
        lambda: BloomFilter(100_000_000_000, 0.01),
        lambda: BloomFilter(700_000_000_000, 0.01, layout="blocked"),
        lambda: CountingBloomFilter(100_000_000_000, 0.01),
        lambda: CuckooFilter(200_000_000_000, 0.01),
    ],
)
def test_filters_larger_than_memory_are_memory_errors(make):
    # 117 GB and more: past any machine CI runs on. Refused before allocating (the
    # interpreter used to abort on the failed allocation), one line naming the size and how to ask for less.
    with pytest.raises(MemoryError) as raised:
        make()
    message = str(raised.value)
    assert "\n" not in message
    assert re.search(r"needs [0-9.]+ [GT]B, more than the [0-9.]+ [kMGT]?B", message), message
    assert "lower the expected number of items" in message


def test_wrong_argument_types_are_type_errors():
    with pytest.raises(TypeError):
        BloomFilter("100", 0.01)
    with pytest.raises(TypeError):
        BloomFilter(100, "1%")
    with pytest.raises(TypeError):
        BloomFilter.from_bytes("not bytes")


def corrupted(image):
    """(name, data, expected message) for damaged versions of a valid image."""
    flipped_body = bytearray(image)
    flipped_body[40] ^= 0x10
    flipped_header = bytearray(image)
    flipped_header[14] ^= 1
    bad_magic = b"NOTBLOOM" + image[8:]
    return [
        ("empty", b"", "truncated header"),
        ("short", image[:20], "truncated header"),
        ("magic", bad_magic, "bad magic"),
        ("header", bytes(flipped_header), "header checksum"),
        ("body", bytes(flipped_body), "checksum"),
        ("truncated", image[:-9], ""),
        ("trailing", image + b"\0", ""),
    ]


@pytest.mark.parametrize("layout", ["classic", "blocked", "fastlocal"])
def test_corrupt_images_name_the_problem(layout, tmp_path):
    f = BloomFilter(1000, 0.01, layout=layout)
    f.update(range(100))
    for name, data, message in corrupted(f.to_bytes()):
        with pytest.raises(ValueError, match="corrupt filter data: .*" + re.escape(message)) as err:
            BloomFilter.from_bytes(data)
        assert str(err.value), name
        with pytest.raises(ValueError, match="corrupt filter data"):
            bloomgate.from_bytes(data)
        path = tmp_path / f"{name}.bgf"
        path.write_bytes(data)
        with pytest.raises(ValueError, match="corrupt filter data: .*" + re.escape(message)):
            BloomFilter.load(path)
        with pytest.raises(ValueError, match="corrupt filter data"):
            bloomgate.load(path)


def test_every_truncation_and_byte_flip_is_refused_cleanly():
    f = CuckooFilter(50, 0.01)
    f.update(range(40))
    image = f.to_bytes()
    for cut in range(len(image)):
        with pytest.raises(ValueError):
            bloomgate.from_bytes(image[:cut])
    for i in range(len(image)):
        damaged = bytearray(image)
        damaged[i] ^= 0xFF
        with pytest.raises(ValueError):
            CuckooFilter.from_bytes(bytes(damaged))


def test_a_file_of_another_kind_says_which_class_opens_it(tmp_path):
    c = CuckooFilter(100, 0.01)
    with pytest.raises(ValueError, match="holds a cuckoo filter, not a BloomFilter; open it with bloomgate.CuckooFilter"):
        BloomFilter.from_bytes(c.to_bytes())
    path = tmp_path / "c.bgf"
    c.save(path)
    with pytest.raises(ValueError, match="holds a cuckoo filter"):
        CountingBloomFilter.load(path)
    assert isinstance(bloomgate.load(path), CuckooFilter)


def test_missing_files_are_os_errors_naming_the_path(tmp_path):
    missing = tmp_path / "nope.bgf"
    with pytest.raises(FileNotFoundError) as e:
        BloomFilter.load(missing)
    assert e.value.filename == str(missing) and str(missing) in str(e.value)
    with pytest.raises(FileNotFoundError, match="/nonexistent"):
        bloomgate.load("/nonexistent")
    target = tmp_path / "no" / "such" / "dir.bgf"
    with pytest.raises(OSError) as e:
        BloomFilter(10, 0.01).save(target)
    assert "dir.bgf" in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_a_list_emptied_by_one_of_its_keys_is_read_as_it_is_then():
    keys = []

    class Big(int):
        def bit_length(self):  # the int encoding calls it for keys beyond 64 bits
            keys.clear()
            return int.bit_length(self)

    keys.extend(["a", Big(2**80), "b", "c"])
    f = BloomFilter(100, 0.01)
    f.update(["a", Big(2**80)])
    assert keys == []
    keys.extend(["a", Big(2**80), "b", "c"])
    assert f.contains_many(keys) == [True, True]  # stops where the list now ends
