"""bloomgate.Gate: the Rust gate from Python over SQLite and PostgreSQL — answers, identity,
retention, stats and metrics, errors, the context manager, fork safety, and a feed simulation
whose answers are exact while only a few percent of candidates reach the exact store."""

import os
import pathlib
import random
import sys
import threading
import time
import uuid
import warnings

import pytest

import bloomgate
from bloomgate import Gate, GateError

DAY_MS = 86_400_000
T0 = 1_700_000_000_000


@pytest.fixture
def sqlite_url(tmp_path):
    return "sqlite:%s" % (tmp_path / "seen.db")


@pytest.fixture
def pg_table_url(postgres_url):
    """The session's PostgreSQL with a table of this test's own."""
    sep = "&" if "?" in postgres_url else "?"
    return "%s%stable=py_%s" % (postgres_url, sep, uuid.uuid4().hex[:12])


def test_unseen_until_recorded(sqlite_url):
    with Gate(sqlite_url) as gate:
        assert gate.unseen("user:1", [1, 2, "x"], now_ms=T0) == [True, True, True]
        gate.record("user:1", [2, "x"], now_ms=T0)
        assert gate.unseen("user:1", [1, 2, "x", b"x"], now_ms=T0 + 1) == [True, False, False, False]
        # Another scope has seen nothing.
        assert gate.unseen("user:2", [2, "x"], now_ms=T0 + 1) == [True, True]
        assert gate.unseen("user:1", [], now_ms=T0 + 1) == []
        gate.record("user:1", [], now_ms=T0 + 1)


def test_ids_are_the_ones_every_door_uses(sqlite_url):
    # A canonical decimal string is that number; other strings and bytes hash to the same id.
    with Gate(sqlite_url) as gate:
        gate.record(42, [7, "item:9", b"\xff\x00"], now_ms=T0)
        assert gate.unseen("42", ["7", b"item:9", bytearray(b"\xff\x00"), memoryview(b"item:9")],
                           now_ms=T0) == [False] * 4
        assert gate.unseen(b"42", [2**64 - 1, "007", "07"], now_ms=T0) == [True] * 3
        gate.record("user:42", [2**64 - 1], now_ms=T0)
        assert gate.unseen("user:42", ["18446744073709551615"], now_ms=T0) == [False]


class Index:
    """An integer type of its own (as NumPy's are): used through ``__index__``."""

    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


def test_integer_types_with_index_are_their_number(sqlite_url):
    with Gate(sqlite_url) as gate:
        gate.record(Index(5), [Index(7), Index(2**64 - 1)], now_ms=T0)
        assert gate.unseen(5, [7, 2**64 - 1, 8], now_ms=T0) == [False, False, True]
        with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
            gate.unseen(Index(-1), [1])
        try:
            import numpy as np
        except ImportError:
            return
        assert gate.unseen(np.uint64(5), np.array([7, 8], dtype=np.int64), now_ms=T0) == [False, True]


def test_records_survive_the_gate(sqlite_url, tmp_path):
    with Gate(sqlite_url, filter_dir=str(tmp_path / "filters")) as gate:
        gate.record("u", range(100), now_ms=T0)
    assert os.listdir(tmp_path / "filters"), "the filters' snapshot was written at close"
    with Gate(sqlite_url) as gate:
        assert gate.unseen("u", [5, 99, 100], now_ms=T0 + 1000) == [False, False, True]


def test_the_window_forgets_and_expire_drops_rows(sqlite_url):
    with Gate(sqlite_url, window_days=1) as gate:
        gate.record("u", [1, 2, 3], now_ms=T0)
        gate.record("u", [4], now_ms=T0 + DAY_MS)
        assert gate.unseen("u", [1, 4], now_ms=T0 + DAY_MS // 2) == [False, False]
        gate.flush()
        assert gate.expire(now_ms=T0 + DAY_MS + 1) == 3
        assert gate.expire(now_ms=T0 + DAY_MS + 2) == 0
        assert gate.unseen("u", [1, 4], now_ms=T0 + DAY_MS + 3) == [True, False]


@pytest.mark.parametrize("policy", ["verify", "trust", "exact"])
def test_policies_answer_recorded_items_as_seen(sqlite_url, policy):
    with Gate(sqlite_url, policy=policy) as gate:
        gate.record(1, range(50), now_ms=T0)
        answers = gate.unseen(1, range(100), now_ms=T0 + 1)
        assert answers[:50] == [False] * 50
        if policy != "trust":  # trust may over-filter at the filter's false-positive rate
            assert answers[50:] == [True] * 50
        assert gate.stats()["policy"] == policy


def test_stats_and_metrics(sqlite_url):
    with Gate(sqlite_url) as gate:
        gate.record(1, range(10), now_ms=T0)
        gate.unseen(1, range(20), now_ms=T0)
        gate.unseen(1, range(20), now_ms=T0)
        gate.flush()
        stats = gate.stats()
        assert stats["policy"] == "verify"
        assert stats["store"] == sqlite_url
        assert stats["requests"] == 2
        assert stats["candidates"] == 40
        assert stats["store_lookups"] + stats["filter_negatives"] <= 40
        assert stats["store_lookups"] >= 20  # the 10 seen ones, twice
        assert stats["recorded_rows"] == 10
        for field in ["filter_maybe", "cache_hits", "store_reads", "history_loads",
                      "record_batches", "filter_errors", "filter_memory_bytes"]:
            assert isinstance(stats[field], int), field
        text = gate.metrics()
        assert "bloomgate_gate_requests_total 2" in text
        assert "bloomgate_gate_candidates_total 40" in text
        assert "bloomgate_gate_filter_negatives_total" in text


def test_bad_arguments(sqlite_url, tmp_path):
    with pytest.raises(ValueError, match="store must be sqlite:PATH"):
        Gate("/tmp/feed.db")
    with pytest.raises(ValueError, match="policy must be"):
        Gate(sqlite_url, policy="maybe")
    with pytest.raises(ValueError, match="filters must be local"):
        Gate(sqlite_url, filters="redis://h:1")
    with pytest.raises(ValueError, match="window_days must be positive"):
        Gate(sqlite_url, window_days=0)
    with pytest.raises(ValueError, match="invalid configuration"):
        Gate(sqlite_url, fpr=2.0)
    with pytest.raises(ValueError, match="partition=month: expected hour, day, week or none"):
        Gate("postgres://u@127.0.0.1:1/db?partition=month")
    with pytest.raises(GateError, match="opening"):
        Gate("sqlite:%s" % (tmp_path / "no" / "such" / "dir" / "x.db"))
    with Gate(sqlite_url) as gate:
        with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
            gate.unseen(-1, [1])
        with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
            gate.record(1, [2**64])
        with pytest.raises(TypeError):
            gate.unseen(1, [1.5])
        with pytest.raises(TypeError, match="not a single str or bytes"):
            gate.record(1, "abc")


def test_a_dead_store_raises_never_answers_unseen(postgres_url):
    # Nothing listens on port 1: the store cannot be reached at all.
    with pytest.raises(GateError, match="connecting to postgres://"):
        Gate("postgres://bloomgate@127.0.0.1:1/postgres?connect_timeout=2")


def test_the_context_manager_closes(sqlite_url):
    with Gate(sqlite_url) as gate:
        gate.record(1, [1], now_ms=T0)
        assert not gate.closed
    assert gate.closed
    assert "closed" in repr(gate)
    for call in [lambda: gate.unseen(1, [1]), lambda: gate.record(1, [2]), gate.flush,
                 gate.stats, gate.metrics, gate.expire]:
        with pytest.raises(GateError, match="the gate is closed"):
            call()
    gate.close()  # again: nothing to do
    # Closing committed the record.
    with Gate(sqlite_url) as again:
        assert again.unseen(1, [1], now_ms=T0) == [False]


def test_an_exception_inside_the_block_still_closes(sqlite_url):
    with pytest.raises(KeyError):
        with Gate(sqlite_url) as gate:
            gate.record(1, [3], now_ms=T0)
            raise KeyError("boom")
    assert gate.closed
    with Gate(sqlite_url) as again:
        assert again.unseen(1, [3], now_ms=T0) == [False]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_clear_error(sqlite_url):
    gate = Gate(sqlite_url)
    gate.record(1, [1], now_ms=T0)
    with warnings.catch_warnings():
        # Python warns that forking a process with threads may deadlock; the point here.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: every call raises; dropping the gate must not hang
        code = 0
        try:
            for call in [lambda: gate.unseen(1, [1]), lambda: gate.record(1, [2]), gate.close]:
                try:
                    call()
                    code = 1
                except GateError as e:
                    if "forked child" not in str(e) or "create a new Gate" not in str(e):
                        code = 2
            del gate
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's gate is untouched.
    assert gate.unseen(1, [1, 2], now_ms=T0) == [False, True]
    gate.close()


def test_threads_share_a_gate(sqlite_url):
    errors = []
    with Gate(sqlite_url) as gate:
        def worker(scope):
            try:
                for i in range(50):
                    now = T0 + i
                    fresh = [x for x, ok in zip(range(i * 5, i * 5 + 10),
                                                gate.unseen(scope, range(i * 5, i * 5 + 10), now_ms=now)) if ok]
                    gate.record(scope, fresh[:5], now_ms=now)
                    if gate.unseen(scope, fresh[:5], now_ms=now) != [False] * len(fresh[:5]):
                        errors.append("scope %d: a recorded item read unseen" % scope)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert errors == []


def test_durable_records_are_in_the_store_when_they_return(tmp_path):
    # Read back through SQLite itself: the rows are committed, not only queued.
    import sqlite3

    path = tmp_path / "seen.db"
    with Gate("sqlite:%s" % path) as gate:
        assert gate.record(7, [1, 2, 3], now_ms=T0, durable=True) == 3
        rows = sqlite3.connect(str(path)).execute("SELECT item FROM seen WHERE scope = 7").fetchall()
        assert sorted(item for (item,) in rows) == [1, 2, 3]
        assert gate.record(7, [], now_ms=T0, durable=True) == 0
        with pytest.raises(TypeError):
            gate.record(7, [4], T0, True)  # durable is keyword-only

        # Threads recording durably share group commits.
        def worker(scope):
            for i in range(25):
                gate.record(scope, [i], now_ms=T0 + i, durable=True)

        before = gate.stats()
        threads = [threading.Thread(target=worker, args=(100 + s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        after = gate.stats()
        assert after["recorded_rows"] - before["recorded_rows"] == 200
        assert after["record_batches"] - before["record_batches"] <= 200


def test_a_durable_record_during_an_outage_raises_and_is_kept(postgres_url):
    # A server of this test's own, to stop: the session's is shared.
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "scripts" / "lib"))
    import bgtest

    with bgtest.Postgres() as pg:
        with Gate(pg.url + "?connect_timeout=2") as gate:
            assert gate.unseen(1, [5, 6], now_ms=T0) == [True, True]
            pg.stop()
            assert gate.record(1, [5], now_ms=T0) == 1  # queued: no error, nothing durable
            with pytest.raises(GateError, match="stay queued"):
                gate.record(1, [6], now_ms=T0, durable=True)
            assert gate.unseen(1, [5, 6], now_ms=T0 + 1) == [False, False]  # hidden meanwhile
            pg.start()
            for _ in range(100):  # the recorder retries with backoff
                try:
                    assert gate.record(1, [6], now_ms=T0, durable=True) == 1  # safe to repeat
                    break
                except GateError:
                    time.sleep(0.1)
            else:
                pytest.fail("the durable record kept failing after the store came back")
            gate.flush()
        with Gate(pg.url) as fresh:  # from the store alone: both were committed
            assert fresh.unseen(1, [5, 6, 7], now_ms=T0 + 2) == [False, False, True]


def feed(url, users=100, requests=1000, candidates=120, seen_share=0.02, shown_per_request=20,
         history_per_user=200, seed=7):
    """The case study's feed: `users` users each with a history of `history_per_user` items
    recorded earlier in the window (by another gate, so this one starts with cold filters), then
    `requests` requests of `candidates` candidates of which ~`seen_share` were shown to that user
    before; `shown_per_request` of the ones answered unseen are recorded. Returns the number of
    duplicates (a candidate shown to the user before answered unseen) and the gate's stats."""
    rng = random.Random(seed)
    shown = {u: [] for u in range(users)}
    with Gate(url) as history:
        for u in range(users):
            items = [rng.getrandbits(63) for _ in range(history_per_user)]
            history.record("user:%d" % u, items, now_ms=T0 - DAY_MS + u)
            shown[u].extend(items)
    duplicates = 0
    with Gate(url) as gate:
        for r in range(requests):
            u = rng.randrange(users)
            scope = "user:%d" % u
            now = T0 + r * 1000
            old = [rng.choice(shown[u]) for _ in range(rng.randint(1, 2 * int(candidates * seen_share) - 1))]
            asked = old + [rng.getrandbits(63) for _ in range(candidates - len(old))]
            rng.shuffle(asked)
            seen_before = set(shown[u])
            answers = gate.unseen(scope, asked, now_ms=now)
            assert len(answers) == len(asked)
            duplicates += sum(1 for item, ok in zip(asked, answers) if ok and item in seen_before)
            fresh = [item for item, ok in zip(asked, answers) if ok][:shown_per_request]
            gate.record(scope, fresh, now_ms=now)
            shown[u].extend(fresh)
        gate.flush()
        stats = gate.stats()
    return duplicates, stats


def check_feed(duplicates, stats, requests=1000, candidates=120):
    assert duplicates == 0
    assert stats["requests"] == requests
    assert stats["candidates"] == requests * candidates
    assert stats["store_lookups"] <= 0.05 * stats["candidates"], stats
    assert stats["filter_negatives"] >= 0.9 * stats["candidates"], stats
    assert stats["recorded_rows"] == requests * 20, stats


def test_feed_over_sqlite(sqlite_url):
    check_feed(*feed(sqlite_url))


def test_feed_over_postgres(pg_table_url):
    check_feed(*feed(pg_table_url))


@pytest.mark.parametrize("partition", ["", "&partition=hour"])
def test_postgres_basics(pg_table_url, partition):
    url = pg_table_url + partition
    with Gate(url, window_days=1) as gate:
        gate.record("user:1", ["a", "b"], now_ms=T0)
        assert gate.unseen("user:1", ["a", "c"], now_ms=T0) == [False, True]
        gate.flush()
        assert gate.stats()["store"] == url  # no password to hide
        assert gate.expire(now_ms=T0 + 2 * DAY_MS) == 2
    with Gate(url, window_days=1) as gate:
        assert gate.unseen("user:1", ["a"], now_ms=T0 + 2 * DAY_MS) == [True]


def test_feed_over_postgres_partitioned_by_day(pg_table_url):
    check_feed(*feed(pg_table_url + "&partition=day"))


def test_the_module_lists_the_gate():
    assert "Gate" in bloomgate.__all__ and "GateError" in bloomgate.__all__
    assert issubclass(GateError, Exception)


def test_the_password_stays_out_of_stats_and_repr(pg_table_url):
    # The test server trusts loopback connections, so any password connects.
    url = pg_table_url.replace("postgres://bloomgate@", "postgres://bloomgate:s3cret@", 1)
    if url == pg_table_url:
        pytest.skip("the server's URL is not the throwaway server's")
    with Gate(url) as gate:
        assert "s3cret" not in gate.stats()["store"]
        assert "bloomgate:***@" in gate.stats()["store"]
        assert "s3cret" not in repr(gate)


def test_gates_sharing_filters_never_show_what_another_recorded(tmp_path, filter_server):
    # Two gates, as two processes would be: their filters and pending rows on the server.
    url = "sqlite:%s" % (tmp_path / "shared.db")
    prefix = "py:%s:" % uuid.uuid4().hex[:8]
    with Gate(url, filters=filter_server, key_prefix=prefix) as a, \
            Gate(url, filters=filter_server, key_prefix=prefix) as b:
        assert b.unseen("user:1", ["x", "y", "z"], now_ms=T0) == [True, True, True]
        assert a.record("user:1", ["x", "y"], now_ms=T0) == 2
        # Before a's group commit as after it.
        assert b.unseen("user:1", ["x", "y", "z"], now_ms=T0 + 1) == [False, False, True]
        a.flush()
        assert b.unseen("user:1", ["x", "y", "z"], now_ms=T0 + 2) == [False, False, True]
        assert b.stats()["filter_errors"] == 0
    with pytest.raises(ValueError, match="pending"):
        Gate(url, filters=filter_server + "?pending=maybe")
