#!/usr/bin/env python3
"""The gate tier at scale: --scopes users (default 1,000,000) whose filters and pending rows live
in a local 3-master Redis Cluster running the module, their rows in a throwaway PostgreSQL,
served by up to three `bloomgate serve --gate-store postgres://... --gate-filters
redis+cluster://...` processes (a release build).

Phases:
  create  every scope's first request (GATE.UNSEEN of one candidate) on a gate: no filter in the
          cluster, so the gate builds it from the store (empty); pipelined on --connections
          connections spread over the three gates.
  record  --items items recorded per scope (GATE.RECORD, named fill:U:J), then every gate's
          backlog committed.
          Measured after each: the masters' used_memory (INFO memory, without the clients'
          buffers and the scripts) and MEMORY USAGE of a
          sample of filter keys, so bytes per scope (empty, then with --items) and the bytes
          recording added per row; PostgreSQL's rows and table size; fill rates.
  feed    the Go client (examples/go/gatetier) against 1, 2, then 3 gates: --requests requests
          of 120 candidates over all scopes (2% of them items the user was recorded before),
          --concurrency in flight, 20 recorded per request; requests/s from its request time,
          store_lookups per candidate from the gates' GATE.INFO before and after, and the CPU
          time per request of the gates, the cluster's nodes and PostgreSQL (/proc: what a
          machine of N cores divides, whatever else ran beside the benchmark).

Prints a table and one JSON line. Needs Go with Debian's redigo, PostgreSQL, redis-cli and a
redis-server (--redis-server, default Debian's). Memory: a few hundred bytes per scope in the
cluster plus PostgreSQL's rows; time: minutes at 1M scopes. Every process it starts is stopped
at the end. Numbers on a shared machine are indicative only.

Usage: scripts/bench/gate_tier_bench.py --bin target/release/bloomgate
           --module target/release/libbloomgate_module.so [--scopes 1000000] [--items 5]
           [--requests 20000] [--concurrency 16] [--connections 24]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402

DEPTH = 64  # commands in flight per fill connection


def used_memory(cluster):
    """The masters' used_memory without their clients' buffers (the gates' pipelines leave
    query buffers that Redis shrinks later) and the Lua scripts' memory."""
    time.sleep(1)
    total = 0
    for port in cluster.masters():
        fields = dict(l.split(":", 1) for l in cluster.call(port, "INFO", "memory").decode().splitlines()
                      if ":" in l)
        total += int(fields["used_memory"]) - int(fields.get("mem_clients_normal", 0)) \
            - int(fields.get("used_memory_scripts", 0))
    return total


def sample_key_bytes(cluster, n=300):
    """Mean MEMORY USAGE of up to n filter keys found by SCAN on the masters."""
    sizes = []
    for port in cluster.masters():
        c = bgtest.Resp(port, 60)
        try:
            cursor, keys = b"0", []
            while len(keys) < n // 3:
                cursor, found = c.call("SCAN", cursor, "MATCH", "bloomgate:gate:bf:*", "COUNT", 1000)
                keys += [k for k in found if k.endswith(b"}")]
                if cursor in (b"0", "0"):
                    break
            sizes += [c.call("MEMORY", "USAGE", k) for k in keys[:n // 3]]
        finally:
            c.close()
    sizes = [s for s in sizes if s is not None]
    return sum(sizes) / len(sizes) if sizes else 0


def pipelined(port, commands):
    """Sends `commands` on one connection, DEPTH at a time; returns the error replies' count."""
    c = bgtest.Resp(port, 120)
    errors = 0
    try:
        for at in range(0, len(commands), DEPTH):
            part = commands[at:at + DEPTH]
            c.sock.sendall(b"".join(encode(cmd) for cmd in part))
            for _ in part:
                try:
                    c.read()
                except RuntimeError:
                    errors += 1
    finally:
        c.close()
    return errors


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def fill(ports, scopes, connections, make):
    """Runs make(scope) for every scope on `connections` connections over the gates' ports;
    returns (seconds, error replies)."""
    errors = [0] * connections

    def worker(i):
        port = ports[i % len(ports)]
        errors[i] = pipelined(port, [make(s) for s in range(i, scopes, connections)])
    t = time.time()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.time() - t, sum(errors)


def cpu_seconds(pids):
    """User + system CPU seconds of these processes so far."""
    total = 0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


def postgres_pids(pg):
    """The PostgreSQL server's processes: the postmaster (its data directory's postmaster.pid)
    and its children."""
    try:
        with open(os.path.join(pg.data, "postmaster.pid")) as f:
            root = int(f.readline())
    except OSError:
        return []
    pids = [root]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == root:
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def pg_rows(pg):
    out = subprocess.run([os.path.join(pg.bin, "psql"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", pg.SUPERUSER,
                          "-d", "postgres", "-Atc",
                          "select count(*), pg_total_relation_size('seen') from seen"],
                         capture_output=True, text=True)
    rows, size = out.stdout.strip().split("|")
    return int(rows), int(size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/bloomgate")
    ap.add_argument("--module", default="target/release/libbloomgate_module.so")
    ap.add_argument("--redis-server", default="redis-server")
    ap.add_argument("--scopes", type=int, default=1_000_000)
    ap.add_argument("--items", type=int, default=5)
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--connections", type=int, default=24)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    binary, module = os.path.abspath(args.bin), os.path.abspath(args.module)
    redis_server = shutil.which(args.redis_server) or args.redis_server
    for what, path in [("bloomgate", binary), ("the module", module), ("redis-server", redis_server)]:
        if not os.path.isfile(path):
            sys.exit("%s is missing: %s" % (what, path))
    if bgtest.postgres_bin_dir() is None or not shutil.which("redis-cli") or not shutil.which("go"):
        sys.exit("needs PostgreSQL, redis-cli and Go with redigo")
    print("load average at start: %s" % open("/proc/loadavg").read().split()[:3], flush=True)
    scratch = tempfile.mkdtemp(prefix="bloomgate-tier-bench-")
    pg = cluster = None
    gates = []
    report = {"scopes": args.scopes, "items_per_scope": args.items}
    try:
        client = bgtest.build_gatetier(scratch)
        pg = bgtest.Postgres()
        cluster = bgtest.Cluster(redis_server, module, os.path.join(scratch, "cluster"), masters=3, replicas=0)
        filters = "redis+cluster://%s" % cluster.seeds()
        for i in range(3):
            d = os.path.join(scratch, "gate-%d" % i)
            os.makedirs(d)
            gates.append(bgtest.Server(bgtest.serve_argv(binary, "--gate-store", pg.url, "--gate-filters", filters,
                                                         "--gate-memory", "64gb"), dir=d, seconds=60))
        ports = [g.port for g in gates]
        base = used_memory(cluster)

        took, errors = fill(ports, args.scopes, args.connections,
                            lambda s: ["GATE.UNSEEN", "user:%d" % s, "probe:%d" % s])
        report["create_per_s"] = args.scopes / took
        report["create_errors"] = errors
        created = used_memory(cluster)
        report["bytes_per_empty_scope"] = (created - base) / args.scopes
        report["key_bytes_empty"] = sample_key_bytes(cluster)
        print("create: %d scopes in %.0fs (%.0f/s, %d errors), %.0f bytes per scope (MEMORY USAGE of a filter key %.0f)"
              % (args.scopes, took, report["create_per_s"], errors, report["bytes_per_empty_scope"],
                 report["key_bytes_empty"]), flush=True)

        items = args.items
        started = time.time()
        _, errors = fill(ports, args.scopes, args.connections,
                            lambda s: ["GATE.RECORD", "user:%d" % s] + ["fill:%d:%d" % (s, j) for j in range(items)])
        bgtest.gate_drained(ports, seconds=600, poll=0.2)
        took_all = time.time() - started
        report["record_rows_per_s"] = args.scopes * items / took_all
        report["record_errors"] = errors
        recorded = used_memory(cluster)
        report["bytes_per_scope"] = (recorded - base) / args.scopes
        # What recording added, per row (the filters' first generation, allocated as it fills).
        report["bytes_per_recorded_item"] = (recorded - created) / (args.scopes * items)
        report["key_bytes"] = sample_key_bytes(cluster)
        report["pg_rows"], report["pg_table_bytes"] = pg_rows(pg)
        print("record: %d rows in %.0fs (%.0f rows/s, %d errors); cluster %.0f bytes per scope (a filter key %.0f),"
              " %.1f more per recorded item; PostgreSQL %d rows, %.0f bytes per row"
              % (args.scopes * items, took_all, report["record_rows_per_s"], errors, report["bytes_per_scope"],
                 report["key_bytes"], report["bytes_per_recorded_item"], report["pg_rows"],
                 report["pg_table_bytes"] / max(1, report["pg_rows"])),
              flush=True)

        report["feed"] = {}
        for n in (1, 2, 3):
            before = [bgtest.gate_info(p, 60) for p in ports[:n]]
            groups = {"gates": [g.proc.pid for g in gates[:n]], "cluster": [p.pid for p in cluster.procs.values()],
                      "postgres": postgres_pids(pg)}
            cpu_before = {k: cpu_seconds(v) for k, v in groups.items()}
            out = subprocess.run([client, "-addrs", ",".join("127.0.0.1:%d" % p for p in ports[:n]),
                                  "-users", str(args.scopes), "-requests", str(args.requests),
                                  "-concurrency", str(args.concurrency), "-known", str(items),
                                  "-readback=false", "-seed", str(n)],
                                 capture_output=True, text=True, timeout=3600)
            line = next((l for l in out.stdout.splitlines() if l.startswith("result ")), None)
            if line is None:
                raise RuntimeError("the client failed: %s" % out.stdout[-2000:])
            result = json.loads(line[len("result "):])
            after = [bgtest.gate_info(p, 60) for p in ports[:n]]
            delta = lambda name: sum(int(a[name]) - int(b[name]) for a, b in zip(after, before))  # noqa: E731
            cpu = {k: (cpu_seconds(v) - cpu_before[k]) / result["requests"] * 1e3 for k, v in groups.items()}
            feed = {
                "requests_per_s": result["requests"] / result["request_seconds"],
                "cpu_ms_per_request": cpu,
                "store_lookups_per_candidate": delta("store_lookups") / max(1, delta("candidates")),
                "history_loads": delta("history_loads"),
                "duplicates": result["duplicates"],
                "failed": result["failed"],
            }
            report["feed"][n] = feed
            print("feed on %d gate(s): %.0f requests/s, store_lookups %.4f per candidate, %d history loads, "
                  "%d duplicates, %d failed; CPU ms per request: gates %.3f, cluster %.3f, PostgreSQL %.3f"
                  % (n, feed["requests_per_s"], feed["store_lookups_per_candidate"], feed["history_loads"],
                     feed["duplicates"], feed["failed"], cpu["gates"], cpu["cluster"], cpu["postgres"]), flush=True)
    finally:
        for g in gates:
            g.close("kill")
        bgtest.close_all((cluster, pg), scratch, args.keep)
    print("load average at end: %s" % open("/proc/loadavg").read().split()[:3], flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
