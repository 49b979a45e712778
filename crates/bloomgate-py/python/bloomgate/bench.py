"""Side-by-side benchmark of bloomgate against the Python Bloom filter packages on PyPI.

    python -m bloomgate.bench [--items 1000000 --items 10000000] [--reps 3] [--markdown]

Contenders that are not installed are skipped (install them with
``pip install rbloom pybloom-live pybloomfiltermmap3 fastbloom-rs``; scripts/bench/py_bench.sh does it
in its own virtualenv). Every filter is sized for N string keys at 1%. Reported per key:
``add`` and ``query`` one key at a time from a Python loop (``for k in keys: f.add(k)``, the
bound method in a local), ``add_batch`` / ``query_batch`` through the package's batch call if
it has one (else ``update`` or ``map(f.__contains__, keys)``), bytes per key, and the false-positive
rate measured on N absent keys next to the 1% asked for. Timings keep the best of ``--reps``
repetitions (a fresh filter for each add repetition). ``loop floor`` is the same loop calling
``len``: the interpreter's share of every one-at-a-time number.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import sys
import time
from typing import Callable, List, Optional

FPR = 0.01


def stable_hash(obj: str) -> int:
    """The stable hash rbloom's README suggests for filters that outlive the process."""
    h = hashlib.sha256(obj.encode()).digest()
    return int.from_bytes(h[:16], "big", signed=True)


class Contender:
    """How to build, fill and query one package's filter."""

    def __init__(self, name: str, make: Callable, *, add_batch=None, query_batch=None,
                 nbytes=None, query=None, slow: bool = False, note: str = ""):
        self.name = name
        self.make = make
        self.add_batch = add_batch or (lambda f, keys: [f.add(k) for k in keys])
        self.query_batch = query_batch or (lambda f, keys: list(map(f.__contains__, keys)))
        self.query = query or (lambda f: f.__contains__)
        self.nbytes = nbytes
        self.slow = slow  # pure Python or a Python hash: skipped above 1M keys
        self.note = note


def _update(f, keys) -> None:
    """The batch add of the packages whose filters have ``update``."""
    f.update(keys)


def _bits_attribute(name: str) -> Callable:
    """``nbytes`` of a filter whose attribute ``name`` is its size in bits."""
    return lambda f: getattr(f, name) / 8


def _bloomgate(bloomgate) -> List[Contender]:
    return [
        Contender(
            f"bloomgate {layout}",
            lambda n, layout=layout: bloomgate.BloomFilter(n, FPR, layout=layout),
            add_batch=_update,
            query_batch=lambda f, keys: f.contains_many(keys),
            nbytes=_bits_attribute("bits"),
            note="XXH3-128 of the UTF-8 bytes (stable, CLI files)",
        )
        for layout in ("classic", "blocked", "fastlocal")
    ]


def _rbloom(rbloom) -> List[Contender]:
    return [
        Contender("rbloom", lambda n: rbloom.Bloom(n, FPR), add_batch=_update,
                  nbytes=_bits_attribute("size_in_bits"),
                  note="default hash: Python's hash(), per-process for str"),
        Contender("rbloom + sha256 hash_func", lambda n: rbloom.Bloom(n, FPR, hash_func=stable_hash),
                  add_batch=_update, nbytes=_bits_attribute("size_in_bits"), slow=True,
                  note="the stable hash of rbloom's README (needed to save/load)"),
    ]


def _fastbloom_rs(fastbloom_rs) -> List[Contender]:
    return [Contender(
        "fastbloom-rs",
        lambda n: fastbloom_rs.BloomFilter(n, FPR),
        add_batch=lambda f, keys: f.add_str_batch(keys),
        query_batch=lambda f, keys: f.contains_str_batch(keys),
        nbytes=lambda f: len(f.get_bytes()),
        query=lambda f: f.contains,
        note="add/contains (type-dispatching); *_str_batch for batches",
    )]


def _pybloomfilter(pybloomfilter) -> List[Contender]:
    return [Contender("pybloomfiltermmap3", lambda n: pybloomfilter.BloomFilter(n, FPR),
                      add_batch=_update, nbytes=_bits_attribute("num_bits"),
                      note="anonymous mmap (no file)")]


def _pybloom_live(pybloom_live) -> List[Contender]:
    return [Contender("pybloom-live", lambda n: pybloom_live.BloomFilter(n, FPR),
                      nbytes=_bits_attribute("num_bits"), slow=True, note="pure Python")]


# The other packages' contenders, by import name, in table order; a package that is not
# installed is skipped.
OPTIONAL_PACKAGES = [
    ("rbloom", _rbloom),
    ("fastbloom_rs", _fastbloom_rs),
    ("pybloomfilter", _pybloomfilter),
    ("pybloom_live", _pybloom_live),
]


def contenders() -> List[Contender]:
    import bloomgate

    out = _bloomgate(bloomgate)
    for module, package_contenders in OPTIONAL_PACKAGES:
        try:
            package = importlib.import_module(module)
        except ImportError:
            continue
        out.extend(package_contenders(package))
    return out


def best(reps: int, run: Callable[[], Optional[float]]) -> float:
    """Best of `reps` timings (seconds); `run` returns its own time or None to time itself."""
    times = []
    for _ in range(reps):
        start = time.process_time()
        own = run()
        times.append(own if own is not None else time.process_time() - start)
    return min(times)


def one_at_a_time(fn, keys) -> float:
    start = time.process_time()
    for k in keys:
        fn(k)
    return time.process_time() - start


def measure(c: Contender, n: int, present, absent, reps: int) -> dict:
    reps = 1 if c.slow else reps
    row = {"name": c.name, "note": c.note}

    def fresh_add():
        f = c.make(n)
        return one_at_a_time(f.add, present)

    row["add"] = best(reps, fresh_add)
    row["add_batch"] = best(reps, lambda: c.add_batch(c.make(n), present) and None)
    # The batch add timing includes building the filter; the same holds for every contender.
    f = c.make(n)
    c.add_batch(f, present)
    query = c.query(f)
    row["query_hit"] = best(reps, lambda: one_at_a_time(query, present))
    row["query_miss"] = best(reps, lambda: one_at_a_time(query, absent))
    hits = []
    row["query_batch"] = best(reps, lambda: hits.append(c.query_batch(f, absent)) and None)
    found = c.query_batch(f, present)
    row["false_negatives"] = len(present) - sum(1 for x in found if x)
    row["fpr"] = sum(1 for x in hits[-1] if x) / len(absent)
    row["bytes_per_key"] = c.nbytes(f) / n if c.nbytes else float("nan")
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, action="append", help="keys per filter (repeatable)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--only", action="append", help="run only contenders whose name contains this")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = p.parse_args(argv)
    sizes = args.items or [1_000_000]
    print(f"# python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    for n in sizes:
        present = [f"user-{i * 7919 % (4 * n):010d}@example.com" for i in range(n)]
        absent = [f"absent-{i:010d}@example.org" for i in range(n)]
        rows = []
        for c in contenders():
            if args.only and not any(o in c.name for o in args.only):
                continue
            if c.slow and n > 1_000_000:
                print(f"skip {c.name} at {n:,} keys: pure Python or a Python-level hash, > 60 s per pass", flush=True)
                continue
            row = measure(c, n, present, absent, args.reps)
            rows.append(row)
            print(format_row(row, n, args.markdown, header=len(rows) == 1), flush=True)
        floor = best(args.reps, lambda: one_at_a_time(len, present))
        print(f"loop floor (len): {floor / n * 1e9:.1f} ns/key", flush=True)
        rb = next((r for r in rows if r["name"] == "rbloom"), None)
        if rb:
            for r in rows:
                if r["name"].startswith("bloomgate"):
                    print(
                        f"{r['name']} vs rbloom at {n:,}: add {rb['add'] / r['add']:.2f}x, "
                        f"query hit {rb['query_hit'] / r['query_hit']:.2f}x, "
                        f"query miss {rb['query_miss'] / r['query_miss']:.2f}x, "
                        f"batch query {rb['query_batch'] / r['query_batch']:.2f}x "
                        f"(rbloom map(__contains__)), batch add {rb['add_batch'] / r['add_batch']:.2f}x",
                        flush=True,
                    )
    return 0


def format_row(r: dict, n: int, markdown: bool, header: bool) -> str:
    ns = lambda s: f"{s / n * 1e9:.0f}"  # noqa: E731
    cells = [r["name"], ns(r["add"]), ns(r["query_hit"]), ns(r["query_miss"]), ns(r["add_batch"]),
             ns(r["query_batch"]), f"{r['bytes_per_key']:.2f}", f"{r['fpr'] * 100:.3f}%",
             str(r["false_negatives"])]
    names = ["contender", "add ns", "query hit ns", "query miss ns", "add batch ns/key",
             "query batch ns/key", "bytes/key", "FPR (asked 1%)", "false neg"]
    if markdown:
        line = "| " + " | ".join(cells) + " |"
        if header:
            line = (f"\n{n:,} keys\n\n| " + " | ".join(names) + " |\n|" + "---|" * len(names) + "\n" + line)
        return line
    return "  ".join(f"{name}={cell}" for name, cell in zip(names, cells))


if __name__ == "__main__":
    sys.exit(main())
