#!/usr/bin/env python3
"""The feed service of the gate's case study, as a redis-py client of `bloomgate serve
--gate-store URL`: USERS users, REQUESTS requests of CANDIDATES candidates of which ~2% were
shown to that user before, RECORD of the unseen ones recorded as shown per request, through
GATE.UNSEEN and GATE.RECORD.

Checks: 0 duplicates (no candidate recorded for that user before is answered unseen) and
GATE.INFO's store_lookups at most 5% of the candidates asked. With --store postgres it starts a
throwaway PostgreSQL and, with --outage, stops it half-way: GATE.UNSEEN for a scope the gate has
not loaded must answer an error (never "not seen") within 15 s while another client's PING is
answered at once, and the gate must work again, without a restart, once PostgreSQL is back.

Usage: gate_feed.py --bin target/debug/bloomgate --store sqlite|postgres [--outage]
                    [--requests N] [--users N] [--seed N]
Exits non-zero on any failed check.
"""
import argparse
import os
import random
import sys
import tempfile
import threading
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)

CANDIDATES = 120
SEEN_SHARE = 0.02
RECORD = 20


def gate_info(r):
    """GATE.INFO as a dict (redis-py gives RESP2's flat array as a list)."""
    flat = r.execute_command("GATE.INFO")
    if isinstance(flat, dict):
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in flat.items()}
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


class Feed:
    """The simulated service: every user's history of shown items (the truth to check against)."""

    def __init__(self, r, users, seed):
        self.r = r
        self.rng = random.Random(seed)
        self.users = ["user:%d" % u for u in range(users)]
        self.shown = {u: [] for u in self.users}
        self.shown_sets = {u: set() for u in self.users}
        self.next_item = 0
        self.requests = self.candidates = self.duplicates = self.not_recorded = 0

    def fresh(self):
        self.next_item += 1
        return "item:%d" % self.next_item

    def request(self):
        user = self.rng.choice(self.users)
        history = self.shown[user]
        candidates = []
        for _ in range(CANDIDATES):
            if history and self.rng.random() < SEEN_SHARE:
                candidates.append(self.rng.choice(history))
            else:
                candidates.append(self.fresh())
        verdict = self.r.execute_command("GATE.UNSEEN", user, *candidates)
        assert len(verdict) == len(candidates), verdict
        unseen = [c for c, v in zip(candidates, verdict) if v == 1]
        self.duplicates += sum(1 for c in unseen if c in self.shown_sets[user])
        chosen = list(dict.fromkeys(unseen))[:RECORD]
        if chosen:
            taken = self.r.execute_command("GATE.RECORD", user, *chosen)
            self.not_recorded += len(chosen) - taken
            for item in chosen[:taken]:
                history.append(item)
                self.shown_sets[user].add(item)
        self.requests += 1
        self.candidates += len(candidates)


def outage(pg, port, failures):
    """PostgreSQL stopped: GATE.UNSEEN for a scope never loaded is an error within 15 s while a
    PING on another connection answers at once; then PostgreSQL is restarted."""
    pg.stop()
    asker = redis.Redis(port=port, socket_timeout=30)
    pinger = redis.Redis(port=port, socket_timeout=30)
    result = {}

    def ask():
        started = time.monotonic()
        try:
            result["answer"] = asker.execute_command("GATE.UNSEEN", "never-loaded", "item:1")
        except redis.ResponseError as e:
            result["error"] = str(e)
        result["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=ask)
    thread.start()
    started = time.monotonic()
    pong = pinger.ping()
    ping_ms = (time.monotonic() - started) * 1000
    thread.join(30)
    print("outage: GATE.UNSEEN answered %r in %.2f s; PING meanwhile in %.1f ms"
          % (result.get("error", result.get("answer")), result.get("seconds", -1), ping_ms))
    if "error" not in result:
        failures.append("GATE.UNSEEN during the outage answered %r, not an error" % result.get("answer"))
    if result.get("seconds", 99) > 15:
        failures.append("GATE.UNSEEN during the outage took %.1f s (> 15 s)" % result["seconds"])
    if not pong or ping_ms > 1000:
        failures.append("PING during the outage took %.0f ms" % ping_ms)
    # Recorded during the outage: taken (the recorder keeps it) and hidden at once.
    taken = asker.execute_command("GATE.RECORD", "outage-user", "outage-item")
    again = asker.execute_command("GATE.UNSEEN", "outage-user", "outage-item")
    if taken != 1 or again != [0]:
        failures.append("record during the outage: taken %r, then unseen %r" % (taken, again))
    pg.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            asker.execute_command("GATE.UNSEEN", "never-loaded", "item:1")
            break
        except redis.ResponseError as e:
            if time.monotonic() > deadline:
                failures.append("the gate did not answer again after PostgreSQL returned: %s" % e)
                return
            time.sleep(0.2)
    print("outage: the gate answers again %.1f s after PostgreSQL restarted" % (30 - (deadline - time.monotonic())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/bloomgate")
    ap.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--outage", action="store_true", help="stop PostgreSQL half-way (postgres only)")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    failures = []
    pg = None
    scratch = tempfile.mkdtemp(prefix="bloomgate-gatefeed-")
    try:
        if args.store == "postgres":
            if bgtest.postgres_bin_dir() is None:
                bgtest.skip_or_fail("gate_feed.py --store postgres",
                                    "PostgreSQL is not installed (bash .ci/setup installs postgresql)")
                return
            pg = bgtest.Postgres()
            url = pg.url + "?connect_timeout=2"
        else:
            url = "sqlite:" + os.path.join(scratch, "seen.db")
        argv = bgtest.serve_argv(args.bin, "--gate-store", url)
        with bgtest.Server(argv, prefix="bloomgate-gatefeed-", seconds=60) as server:
            r = redis.Redis(port=server.port, socket_timeout=30)
            feed = Feed(r, args.users, args.seed)
            started = time.monotonic()
            for i in range(args.requests):
                if args.outage and pg is not None and i == args.requests // 2:
                    outage(pg, server.port, failures)
                feed.request()
            seconds = time.monotonic() - started
            info = gate_info(r)
            lookups = int(info["store_lookups"])
            share = lookups / max(1, feed.candidates)
            print("%s: %d requests in %.1f s (%.0f/s), %d candidates, %d duplicates, %d not recorded, "
                  "store_lookups %d (%.2f%% of candidates), filter_negatives %s"
                  % (args.store, feed.requests, seconds, feed.requests / seconds, feed.candidates,
                     feed.duplicates, feed.not_recorded, lookups, 100 * share, info["filter_negatives"]))
            if feed.duplicates:
                failures.append("%d duplicates" % feed.duplicates)
            if share > 0.05:
                failures.append("store_lookups are %.2f%% of candidates (> 5%%)" % (100 * share))
            if int(info["requests"]) < feed.requests:
                failures.append("GATE.INFO counts %s requests, sent %d" % (info["requests"], feed.requests))
    finally:
        if pg is not None:
            pg.close()
        import shutil
        shutil.rmtree(scratch, ignore_errors=True)
    for f in failures:
        print("FAIL " + f)
    if failures:
        sys.exit(1)
    print("gate feed (%s): ok" % args.store)


if __name__ == "__main__":
    main()
