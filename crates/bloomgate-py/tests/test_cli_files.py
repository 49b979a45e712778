"""Files cross between Python and the `bloomgate` CLI: a filter built by `bloomgate build` answers
the same in Python, and a filter saved by Python answers the same in `bloomgate query`."""

import json
import subprocess

import pytest

import bloomgate

KINDS = {
    "classic": bloomgate.BloomFilter,
    "blocked": bloomgate.BloomFilter,
    "fastlocal": bloomgate.BloomFilter,
    "counting": bloomgate.CountingBloomFilter,
    "scalable": bloomgate.ScalableBloomFilter,
    "cuckoo": bloomgate.CuckooFilter,
}


def run(cli, *args, stdin=None):
    return subprocess.run(
        [cli, *args], input=stdin, capture_output=True, check=True, timeout=120
    ).stdout


def keys_file(tmp_path, keys):
    path = tmp_path / "keys.txt"
    path.write_bytes(b"".join(k + b"\n" for k in keys))
    return path


def cli_answers(cli, filter_path, queries, tmp_path):
    """Set of queries the CLI says are present."""
    qpath = tmp_path / "queries.txt"
    qpath.write_bytes(b"".join(q + b"\n" for q in queries))
    out = run(cli, "query", str(filter_path), "--input", str(qpath))
    return {line.rsplit(b"\t", 1)[0] for line in out.splitlines() if line.endswith(b"\tpresent")}


QUERIES = [f"user-{i}".encode() for i in range(0, 40_000, 3)] + [
    f"other-{i}".encode() for i in range(20_000)
] + ["ünïcode-1".encode(), b"\xff\xfe raw"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_cli_built_file_answers_the_same_in_python(cli, tmp_path, kind):
    keys = [f"user-{i}".encode() for i in range(20_000)] + ["ünïcode-1".encode(), b"\xff\xfe raw"]
    out = tmp_path / f"{kind}.bgf"
    run(cli, "build", "--input", str(keys_file(tmp_path, keys)), "--output", str(out),
        "--kind", kind, "--fpr", "0.02", "--seed", "11")
    f = KINDS[kind].load(out)
    assert type(bloomgate.load(out)) is KINDS[kind]
    assert f.seed == 11
    if kind in ("classic", "blocked", "fastlocal"):
        assert f.layout == kind
    # Keys as str and as bytes both hash as the CLI's line bytes.
    assert all(k.decode() in f for k in keys[:-1])
    assert all(f.contains_many(keys))
    python = {q for q, hit in zip(QUERIES, f.contains_many(QUERIES)) if hit}
    assert python == cli_answers(cli, out, QUERIES, tmp_path)
    assert len(python) > 6_000  # the present keys, plus a few false positives
    assert f.to_bytes() == out.read_bytes()


@pytest.mark.parametrize(
    "make",
    [
        lambda: bloomgate.BloomFilter(30_000, 0.01),
        lambda: bloomgate.BloomFilter(30_000, 0.01, layout="blocked", seed=5),
        lambda: bloomgate.CountingBloomFilter(30_000, 0.01),
        lambda: bloomgate.ScalableBloomFilter(1000, 0.01),
        lambda: bloomgate.CuckooFilter(30_000, 0.01),
        lambda: bloomgate.WindowedBloomFilter(3, 30_000, 0.01, now_ms=0),
    ],
)
def test_python_saved_file_answers_the_same_in_the_cli(cli, tmp_path, make):
    f = make()
    f.update(f"user-{i}" for i in range(20_000))
    f.add("ünïcode-1")
    f.add(b"\xff\xfe raw")
    path = tmp_path / "py.bgf"
    f.save(path)
    python = {q for q, hit in zip(QUERIES, f.contains_many(QUERIES)) if hit}
    assert python == cli_answers(cli, path, QUERIES, tmp_path)
    info = json.loads(run(cli, "info", str(path), "--json"))
    assert info["items"] == len(f)
    assert info["seed"] == f.seed


def test_cli_removes_what_python_added(cli, tmp_path):
    f = bloomgate.CuckooFilter(1000, 0.01)
    f.update(["a", "b", "c"])
    path = tmp_path / "c.bgf"
    f.save(path)
    run(cli, "remove", str(path), "b")
    g = bloomgate.CuckooFilter.load(path)
    assert "a" in g and "c" in g and g.count("b") == 0 and len(g) == 2


def test_int_keys_match_their_documented_bytes_in_the_cli(cli, tmp_path):
    f = bloomgate.BloomFilter(1000, 0.001)
    f.add(0x6968)  # little-endian bytes: b"hi" + six NULs
    path = tmp_path / "i.bgf"
    f.save(path)
    q = tmp_path / "q.txt"
    q.write_bytes(b"hi\0\0\0\0\0\0\n")
    assert json.loads(run(cli, "query", str(path), "--input", str(q), "--count")) == {
        "queried": 1, "present": 1}
