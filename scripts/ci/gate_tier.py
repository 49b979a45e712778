#!/usr/bin/env python3
"""The gate across machines, on one: three `bloomgate serve --gate-store postgres://...
--gate-filters redis+cluster://...?wait=1` processes sharing their filters and pending rows in a
Redis 8.2 Cluster running the module (3 masters with 2 replicas each, loopback), over one
throwaway PostgreSQL. The Go client (examples/go/gatetier, redigo) sends 4,000 requests of 120
candidates over 200 users, each to a random gate, 8 at a time, and records 20 per request. Half
way through one gate is killed with SIGKILL and started again (its clients retry on the others;
it replays its log); at three quarters a master is killed with SIGKILL, one of its replicas is
promoted, and the killed node comes back as a replica.

Checks: 0 duplicates, 0 items reported seen that were never recorded, every acknowledged record
reads back as seen at the end, requests that met an error before the failover (the gate kill
among them) <= 2% and requests that failed after their retries <= 2%, each gate's
store_lookups <= 5% of its candidates (GATE.INFO; the restarted gate's since its restart), the
killed gate replayed rows from its log, filter keys on every master, the pending hashes emptied.

Usage: gate_tier.py --bin target/debug/bloomgate --module target/debug/libbloomgate_module.so
                    --redis-server "$(bash scripts/ci/get_redis8.sh)"
Needs Go with Debian's redigo, PostgreSQL, redis-cli and the given Redis: a missing one fails
the run. Every wait is bounded and the run is limited by an alarm; every process started is
stopped, also on failure.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)

TOTAL_LIMIT_S = 420
GATES = 3


def fail(msg):
    print("FAIL " + msg, flush=True)
    sys.exit(1)


def build_client(scratch):
    try:
        return bgtest.build_gatetier(scratch)
    except RuntimeError as e:
        fail(str(e))


class Gates:
    """The serve processes: each on its port and directory, restartable."""

    def __init__(self, binary, scratch, store, filters):
        self.servers = []
        for i in range(GATES):
            d = os.path.join(scratch, "gate-%d" % i)
            os.makedirs(d)
            argv = bgtest.serve_argv(binary, "--gate-store", store, "--gate-filters", filters)
            self.servers.append(bgtest.Server(argv, dir=d, seconds=60))

    def addrs(self):
        return ",".join("127.0.0.1:%d" % s.port for s in self.servers)

    def close(self):
        for s in self.servers:
            s.close("kill")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/bloomgate")
    ap.add_argument("--module", default="target/debug/libbloomgate_module.so")
    ap.add_argument("--redis-server", required=True, help="a Redis 8.2 redis-server")
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    binary, module = os.path.abspath(args.bin), os.path.abspath(args.module)
    for what, path in [("bloomgate", binary), ("the module", module), ("Redis 8.2", args.redis_server)]:
        if not os.path.isfile(path):
            fail("%s is missing: %s" % (what, path))
    if not shutil.which("redis-cli"):
        fail("redis-cli is needed (redis-tools: .ci/setup)")
    if bgtest.postgres_bin_dir() is None:
        fail("PostgreSQL (initdb, pg_ctl) is needed (.ci/setup installs it)")

    def on_alarm(*_):
        raise TimeoutError("the run took over %d s" % TOTAL_LIMIT_S)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TOTAL_LIMIT_S)
    started = time.time()
    scratch = tempfile.mkdtemp(prefix="bloomgate-tier-")
    failures = []
    cluster = gates = pg = client = None

    def check(name, ok, detail=""):
        print(("ok   %s" if ok else "FAIL %s") % name + ("" if ok or not detail else " (%s)" % detail), flush=True)
        if not ok:
            failures.append(name)

    try:
        go_client = build_client(scratch)
        pg = bgtest.Postgres()
        cluster = bgtest.Cluster(args.redis_server, module, os.path.join(scratch, "cluster"),
                                 masters=3, replicas=2, node_timeout_ms=2000)
        print("cluster: 3 masters x 2 replicas on %s; PostgreSQL on %d (%.1fs)"
              % (cluster.ports, pg.port, time.time() - started), flush=True)
        filters = "redis+cluster://%s?wait=1&wait_timeout=1000" % cluster.seeds()
        gates = Gates(binary, scratch, pg.url, filters)
        print("gates on %s" % gates.addrs(), flush=True)
        client = subprocess.Popen([go_client, "-addrs", gates.addrs(), "-users", str(args.users),
                                   "-requests", str(args.requests), "-concurrency", "8", "-hold"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        counters = None
        rng = random.Random(7)
        events = {}
        result = None
        victim_gate = rng.randrange(GATES)
        for line in client.stdout:
            line = line.strip()
            if line.startswith("result "):
                result = json.loads(line[len("result "):])
                continue
            if line == "requests done":
                # The gates' counters of the requests (the read-back that follows is not one).
                bgtest.gate_drained([s.port for s in gates.servers], seconds=30 * GATES)
                counters = [bgtest.gate_info(s.port) for s in gates.servers]
                client.stdin.write("\n")
                client.stdin.flush()
                continue
            if not line.startswith("progress "):
                print("client: " + line, flush=True)
                continue
            done = int(line.split()[1])
            if done >= args.requests // 2 and "gate" not in events:
                server = gates.servers[victim_gate]
                t = time.time()
                server.stop("kill")
                server.start()
                events["gate"] = time.time() - t
                print("%d requests done: gate %d (port %d) killed with SIGKILL and started again in %.1fs"
                      % (done, victim_gate, server.port, events["gate"]), flush=True)
            if done >= args.requests * 3 // 4 and "failover" not in events:
                events["failover"] = True
                threading.Thread(target=failover, args=(cluster, events), daemon=True).start()
        client.wait(60)
        check("the client finished (exit %s)" % client.returncode, result is not None)
        if result is None:
            return
        print("client: %s" % json.dumps(result), flush=True)
        deadline = time.time() + 60
        while isinstance(events.get("failover"), bool) and time.time() < deadline:
            time.sleep(0.2)
        check("a master failed over: %s" % events.get("failover"), events.get("failover_ok", False))
        n = result["requests"]
        check("%d requests of %d candidates, 0 duplicates" % (n, 120), n == args.requests and result["duplicates"] == 0,
              json.dumps(result))
        check("0 items reported seen that were never recorded", result["false_seen"] == 0)
        check("all %d acknowledged records read back as seen" % result["acknowledged"],
              result["unread"] == 0 and result["acknowledged"] > n * 10)
        blocks = result["retried_by_thousand"]
        before = args.requests * 3 // 4 // 1000  # the blocks of requests before the failover
        errored = sum(blocks[:before])
        check("requests that met an error before the failover (the gate killed and restarted among them): "
              "%d of %d (<= 2%%)" % (errored, before * 1000), errored <= before * 1000 * 0.02,
              json.dumps(result["errors"]))
        print("     (through the failover: %d of %d requests met an error and were retried; %d tries failed in all)"
              % (sum(blocks[before:]), n - before * 1000, result["attempt_errors"]), flush=True)
        check("requests failed after their retries: %d of %d" % (result["failed"], n), result["failed"] <= n * 0.02)
        check("the gates' counters were read after the requests", counters is not None)
        for i, g in enumerate(counters or []):
            print("     gate %d: %s" % (i, {k: v for k, v in g.items() if k not in ("store", "filters", "policy")}),
                  flush=True)
            cands, lookups = int(g["candidates"]), int(g["store_lookups"])
            share = lookups / cands if cands else 0
            check("gate %d: store_lookups %d of %d candidates (%.2f%% <= 5%%), history_loads %s, filter_errors %s, "
                  "record_replayed %s" % (i, lookups, cands, 100 * share, g["history_loads"], g["filter_errors"],
                                          g["record_replayed"]),
                  cands > 0 and share <= 0.05)
            if i == victim_gate:
                check("the restarted gate replayed its log (record_replayed %s)" % g["record_replayed"],
                      int(g["record_replayed"]) > 0)
        keys = {}
        pending = 0
        for p in cluster.masters():
            ks = [k for k in scan(p, "bloomgate:gate:*")]
            keys[p] = sum(1 for k in ks if not k.endswith(b":p") and not k.endswith(b":l"))
            pending += sum(int(cluster.call(p, "HLEN", k)) for k in ks if k.endswith(b":p"))
        check("filter keys on every master: %s" % keys, len(keys) == 3 and all(keys.values()))
        print("     (pending rows left in the cluster: %d)" % pending, flush=True)
    except Exception as e:  # noqa: BLE001 - reported, then everything is stopped
        check("run completed", False, "%s: %s" % (type(e).__name__, e))
        if cluster:
            for p in cluster.ports:
                print("--- node %d:\n%s" % (p, cluster.log_tail(p, 600)), flush=True)
        if gates:
            for s in gates.servers:
                print("--- gate %d:\n%s" % (s.port, s.tail(1500)), flush=True)
    finally:
        signal.alarm(0)
        if client and client.poll() is None:
            client.kill()
            client.wait()
        bgtest.close_all((gates, cluster, pg), scratch, args.keep)
    print("gate tier: %s (%.0fs)" % ("ok" if not failures else "%d failed" % len(failures), time.time() - started),
          flush=True)
    sys.exit(1 if failures else 0)


def scan(port, pattern):
    c = bgtest.Resp(port, 30)
    try:
        cursor, out = b"0", []
        while True:
            cursor, keys = c.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            out.extend(keys)
            if cursor in (b"0", "0"):
                return out
    finally:
        c.close()


def failover(cluster, events):
    """Kills a master with SIGKILL, waits until one of its replicas holds its slots, starts the
    killed node again (it rejoins as a replica); records what happened in `events`."""
    t = time.time()
    try:
        view = cluster.nodes()
        victim = cluster.masters()[0]
        victim_id = view[victim][0]
        replicas = [p for p, v in view.items() if v[1] == "replica" and v[2] == victim_id]
        cluster.kill9(victim)
        deadline = time.time() + 60
        promoted = None
        while promoted is None and time.time() < deadline:
            time.sleep(0.2)
            try:
                now = cluster.nodes(replicas[-1])
                promoted = next((p for p in replicas if now[p][1] == "master"), None)
            except (OSError, RuntimeError):
                pass
        if promoted is None:
            events["failover"] = "no replica of %d was promoted" % victim
            return
        took = time.time() - t
        cluster.start(victim)
        cluster.wait_ok(60)
        events["failover"] = ("master %d killed, replica %d promoted after %.1fs, %d back as a replica after %.1fs"
                              % (victim, promoted, took, victim, time.time() - t))
        events["failover_ok"] = True
        print("failover: " + events["failover"], flush=True)
    except Exception as e:  # noqa: BLE001 - reported by the main thread's check
        events["failover"] = "failed: %s" % e


if __name__ == "__main__":
    main()
