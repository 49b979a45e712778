"""Never a false negative (hypothesis and seeded random keys), and measured false-positive
rates within tolerance of the model, through the Python API."""

import math
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomgate import (
    BloomFilter,
    CountingBloomFilter,
    CuckooFilter,
    ScalableBloomFilter,
    WindowedBloomFilter,
)

KEYS = st.one_of(
    st.text(),
    st.binary(),
    st.integers(min_value=-(2**80), max_value=2**80),
)


def every_filter():
    return [
        BloomFilter(300, 0.01),
        BloomFilter(300, 0.01, layout="blocked", seed=3),
        BloomFilter(300, 0.01, layout="fastlocal", seed=5),
        CountingBloomFilter(300, 0.01),
        ScalableBloomFilter(10, 0.01),
        CuckooFilter(300, 0.01),
        WindowedBloomFilter(2, 300, 0.01, now_ms=0),
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(KEYS, max_size=200))
def test_no_false_negatives_hypothesis(keys):
    for f in every_filter():
        for k in keys[:100]:
            f.add(k)
        f.update(keys[100:])
        assert all(k in f for k in keys), type(f).__name__
        assert all(f.contains_many(keys)), type(f).__name__


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("layout", ["classic", "blocked", "fastlocal"])
def test_no_false_negatives_seeded(seed, layout):
    rng = random.Random(seed)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(50_000)]
    keys += [str(rng.random()) for _ in range(50_000)]
    keys += [rng.getrandbits(70) - 2**69 for _ in range(20_000)]
    f = BloomFilter(len(keys), 0.01, layout=layout, seed=seed)
    f.update(keys[::2])
    for k in keys[1::2]:
        f.add(k)
    assert all(f.contains_many(keys))


@pytest.mark.parametrize("layout", ["classic", "blocked", "fastlocal"])
@pytest.mark.parametrize("fpr", [0.01, 0.001])
def test_fpr_within_tolerance_of_the_model(layout, fpr):
    n, queries = 200_000, 1_000_000
    f = BloomFilter(n, fpr, layout=layout)
    f.update(range(n))
    assert len(f) >= n * 0.99
    hits = sum(f.contains_many(range(n, n + queries)))
    measured = hits / queries
    model = f.fpr
    sigma = math.sqrt(model * (1 - model) / queries)
    assert abs(measured - model) <= 4 * sigma + 0.05 * model, (measured, model)
    # The fill-based estimate agrees with the model at capacity.
    assert abs(f.estimated_fpr() - model) <= 0.1 * model
    assert abs(f.estimated_len() - n) <= 0.02 * n


def test_fpr_of_the_other_filters_stays_below_target():
    n, queries = 50_000, 400_000
    for f in [CountingBloomFilter(n, 0.01), ScalableBloomFilter(n // 16, 0.01), CuckooFilter(n, 0.01)]:
        f.update(range(n))
        measured = sum(f.contains_many(range(n, n + queries))) / queries
        assert measured <= 0.01 * 1.1, (type(f).__name__, measured)


def test_threads_share_a_filter():
    """Writers and batch readers on one filter: every key a writer finished adding is found,
    and nothing deadlocks (bounded: joins with a timeout)."""
    f = BloomFilter(400_000, 0.01, layout="blocked")
    done = []
    errors = []

    def writer(w):
        try:
            keys = [f"w{w}-{i}" for i in range(50_000)]
            for chunk in range(0, len(keys), 5_000):
                f.update(keys[chunk : chunk + 5_000])
                assert all(f.contains_many(keys[: chunk + 5_000]))
            for k in keys[:2_000]:
                f.add(k)
                assert k in f
            done.append(w)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def merger():
        try:
            for _ in range(20):
                other = BloomFilter(400_000, 0.01, layout="blocked")
                other.add("merged")
                f.__ior__(other)
                _ = f | other
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    threads.append(threading.Thread(target=merger))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a thread is stuck"
    assert not errors, errors
    assert sorted(done) == [0, 1, 2, 3]
    assert "merged" in f
    assert all(f.contains_many([f"w{w}-{i}" for w in range(4) for i in range(50_000)]))


def test_single_key_calls_race_batch_calls(tmp_path):
    """`key in f` and `f.add(key)` skip the filter's lock while no other thread uses it (they
    hold the GIL throughout); batch calls register before they let the GIL go. Single-key
    writers and readers race many short batch calls (each a registration: `update`,
    `contains_many`, `save`) and unions: every key a thread finished adding is found by every
    path, and nothing deadlocks (bounded: joins with a timeout)."""
    for layout in ("classic", "blocked", "fastlocal"):
        f = BloomFilter(200_000, 0.01, layout=layout)
        errors = []
        stop = threading.Event()

        def single(w):
            try:
                for i in range(20_000):
                    key = f"s{w}-{i}"
                    f.add(key)
                    assert key in f, key
                    if i % 997 == 0:
                        assert all(f"s{w}-{j}" in f for j in range(i + 1))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def batches():
            try:
                n = 0
                while not stop.is_set():
                    keys = [f"b{n}-{i}" for i in range(64)]
                    f.update(keys)
                    assert all(f.contains_many(keys))
                    if n % 50 == 0:
                        f.save(str(tmp_path / f"{layout}.bloom"))
                        f.__ior__(BloomFilter(200_000, 0.01, layout=layout))
                    n += 1
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        background = [threading.Thread(target=batches) for _ in range(2)]
        writers = [threading.Thread(target=single, args=(w,)) for w in range(3)]
        for t in background + writers:
            t.start()
        for t in writers:
            t.join(timeout=120)
            assert not t.is_alive(), "a single-key thread is stuck"
        stop.set()
        for t in background:
            t.join(timeout=120)
            assert not t.is_alive(), "a batch thread is stuck"
        assert not errors, errors
        everything = [f"s{w}-{i}" for w in range(3) for i in range(20_000)]
        assert all(f.contains_many(everything))
        assert all(k in f for k in everything)
