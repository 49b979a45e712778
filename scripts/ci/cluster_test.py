#!/usr/bin/env python3
"""Redis Cluster test: BF.* and CF.* keys of the bloomgate module survive sharding, resharding and
failover in a real cluster of Debian's redis-server (three masters, three replicas, loopback only).

Why: the module's answer to "one process is not enough" is to run inside the Redis Cluster users
already operate. That only holds if the cluster can route our commands (key specs), move our keys
(MIGRATE = DUMP/RESTORE = our RDB save/load) and replicate them (failover loses no acknowledged write).

Phases, each checked through a cluster-aware client (redis-py RedisCluster) and node by node:
  1. load   - 100,000 items over 1,000 keys (half BF, half CF); every item answers 1 through every
              node (masters directly or by following MOVED, replicas after READONLY); a sample of
              absent items answers mostly 0.
  2. reshard - `redis-cli --cluster reshard` moves 3,000 slots from one master to another, then
              `redis-cli --cluster rebalance` moves them back: every item still answers 1.
  gate      - with --bloomgate BIN: `bloomgate demo feed --filters redis+cluster://...` keeps its
              per-user WF.* filters in the cluster (cluster-aware `redis` crate client): no
              duplicate shown in any mode, and the filter keys are spread over several masters.
              A second run with a filter memory budget of a few KiB makes the gate forget users
              and find their filters again while requests run: still no duplicate shown.
  merge     - BF.MERGE of hash-tagged keys routes through RedisCluster (its key specs); keys in
              two slots answer CROSSSLOT.
  3. failover - writes acknowledged by `WAIT 1 <ms>` while a master is killed with SIGKILL; its
              replica is promoted, every acknowledged item answers 1; the killed node restarts
              and rejoins as a replica, and answers (READONLY) from its new master's data.

Usage: cluster_test.py --module PATH_TO_libbloomgate_module.so
Every wait is bounded; the whole run is bounded by an alarm. Processes and the temporary directory
are removed on exit, also on failure. Prints `cluster: N passed, M failed` and exits non-zero on
any failure.
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
import traceback

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from bgtest import port_free, wait_ready  # noqa: E402  (scripts/lib, found from this file)

KEYS = 1000  # half BF, half CF
ITEMS_PER_KEY = 100  # 100,000 items in all
ABSENT = 10_000  # absent probes
ABSENT_MAX_RATE = 0.05  # BF keys at 1% error, CF keys at ~1.6% (8-bit fingerprints, 2 per bucket)
NODE_TIMEOUT_MS = 3000  # low enough for a quick failover, high enough that a loaded CI machine does not look dead
REPLICA_CONFIG = ["bf.bf-error-rate", "0.05", "bf.bf-initial-size", "50", "bf.cf-initial-size", "512",
                  "bf.cf-bucket-size", "4"]
TOTAL_LIMIT_S = 360

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name} {detail}", flush=True)


class Dialect:
    """The module commands each phase uses, by key family (bf:* keys BF, cf:* keys CF)."""

    @staticmethod
    def add(key, items):
        if key.startswith("bf:"):
            return ["BF.MADD", key, *items]  # auto-creates: replicated as BF.INSERT with parameters
        return ["CF.INSERT", key, "ITEMS", *items]

    @staticmethod
    def exists(key, items):
        return ["BF.MEXISTS" if key.startswith("bf:") else "CF.MEXISTS", key, *items]

    @staticmethod
    def info(key):
        return ["BF.INFO" if key.startswith("bf:") else "CF.INFO", key]

    @staticmethod
    def added(reply):
        """Whether an add reply says every item is (now) present: BF.MADD answers 0 for an item
        already (maybe) present; only errors and CF's -1 (no room) fail."""
        return isinstance(reply, list) and all(r in (0, 1) for r in reply)


def key_names():
    half = KEYS // 2
    return [f"bf:{i}" for i in range(half)] + [f"cf:{i}" for i in range(KEYS - half)]


def items_of(key, n=ITEMS_PER_KEY, tag="i"):
    return [f"{tag}:{key}:{j}" for j in range(n)]


class Cluster:
    """Six redis-server processes on loopback ports, each in its own directory."""

    def __init__(self, module, root):
        self.module = module
        self.root = root
        self.procs = {}  # port -> Popen
        self.base = self._pick_base()
        self.ports = [self.base + i for i in range(6)]

    @staticmethod
    def _pick_base():
        """A random block of 6 client ports + 6 bus ports (base+10..) with every port free."""
        rng = random.SystemRandom()
        for _ in range(200):
            base = rng.randrange(20000, 40000, 20)
            ports = [base + i for i in range(6)] + [base + 10 + i for i in range(6)]
            if all(port_free(p) for p in ports):
                return base
        sys.exit("no free block of loopback ports")

    def start(self, port):
        d = os.path.join(self.root, str(port))
        os.makedirs(d, exist_ok=True)
        args = [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-port", str(port + 10),
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--enable-debug-command", "local",
            "--logfile", os.path.join(d, "redis.log"),
        ]
        args += ["--loadmodule", self.module]
        self.procs[port] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(port, self.procs[port], 20)
        except RuntimeError as e:
            raise RuntimeError(f"redis-server on {port}: {e}: {self.log_tail(port)}") from None

    def kill9(self, port):
        p = self.procs.pop(port)
        p.send_signal(signal.SIGKILL)
        p.wait()

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        deadline = time.time() + 5
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def log_tail(self, port, lines=15):
        try:
            with open(os.path.join(self.root, str(port), "redis.log")) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def live(self):
        return sorted(self.procs)


def node(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def redis_cli(*args, timeout=120):
    r = subprocess.run(["redis-cli", *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"redis-cli {' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def wait_until(what, fn, limit=60):
    """Polls `fn` until it returns True; anything else it returns (or raises) is the reason why
    not yet, reported on timeout."""
    deadline = time.time() + limit
    last = None
    while time.time() < deadline:
        try:
            got = fn()
            if got is True:
                return
            last = got
        except (redis.RedisError, KeyError) as e:  # KeyError: a node not yet in some view
            last = e
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what} (last: {last})")


def nodes_view(port):
    """CLUSTER NODES seen by one node: {port: (id, role, master_id, flags, slot_count)}."""
    out = {}
    text = node(port).execute_command("CLUSTER", "NODES")
    if isinstance(text, bytes):
        text = text.decode()
    for line in text.strip().splitlines():
        f = line.split()
        p = int(f[1].split("@")[0].split(":")[1])
        flags = f[2].split(",")
        role = "master" if "master" in flags else "replica"
        slots = 0
        for r in f[8:]:
            if r.startswith("["):
                continue
            a, _, b = r.partition("-")
            slots += int(b or a) - int(a) + 1
        out[p] = (f[0], role, f[3], flags, slots)
    return out


def cluster_ok(ports):
    def ok():
        for p in ports:
            info = node(p).execute_command("CLUSTER", "INFO")
            if isinstance(info, bytes):
                info = info.decode()
            if "cluster_state:ok" not in info:
                return f"node {p}: {' '.join(info.split()[:6])}"
        return True
    return ok


def wait_consistent(ports):
    """Cluster state ok everywhere, every node agreeing on every live node's role (gossip settled)
    and `redis-cli --cluster check` agreeing (slots settled)."""
    wait_until("cluster state ok", cluster_ok(ports))

    def agreed():
        views = {p: nodes_view(p) for p in ports}
        differ = [(q, p) for p in ports for q in ports if views[q].get(p, (None, None))[1] != views[p][p][1]]
        return not differ or f"(viewer, node) disagreeing on the node's role: {differ}"
    wait_until("nodes agreeing on roles", agreed)
    def checked():
        r = subprocess.run(["redis-cli", "--cluster", "check", f"127.0.0.1:{ports[0]}"],
                           capture_output=True, text=True, timeout=30)
        ok = r.returncode == 0 and "[OK] All 16384 slots covered" in r.stdout and "[WARNING]" not in r.stdout
        return ok or (r.stdout + r.stderr)[-400:]
    wait_until("redis-cli --cluster check", checked)


def wait_replicas_synced(ports):
    """Every replica's replication offset has reached its master's."""
    def synced():
        offsets = {}
        for p in ports:
            info = node(p).info("replication")
            if info["role"] == "master":
                offsets[p] = info["master_repl_offset"]
        for p in ports:
            info = node(p).info("replication")
            if info["role"] == "slave":
                if info.get("master_link_status") != "up":
                    return False
                if info["slave_repl_offset"] < offsets.get(info["master_port"], 0):
                    return False
        return True
    wait_until("replicas in sync", synced)


def client(port):
    return RedisCluster(host="127.0.0.1", port=port, socket_timeout=10)


def load(rc, d, keys):
    pipe = rc.pipeline()
    for k in keys:
        pipe.execute_command(*d.add(k, items_of(k)))
    cmds = [d.add(k, items_of(k)) for k in keys]
    bad = [c[1] for c, r in zip(cmds, pipe.execute(raise_on_error=False)) if not Dialect.added(r)]
    check(f"load {len(keys) * ITEMS_PER_KEY} items over {len(keys)} keys", not bad, f"bad keys: {bad[:5]}")


def missing_via_cluster(rc, d, expected):
    """expected: {key: [items]}; returns the (key, item) pairs that do not answer 1."""
    pipe = rc.pipeline()
    keys = list(expected)
    for k in keys:
        pipe.execute_command(*d.exists(k, expected[k]))
    missing = []
    for k, reply in zip(keys, pipe.execute(raise_on_error=False)):
        if isinstance(reply, Exception):
            missing += [(k, f"error {reply}")]
            continue
        missing += [(k, it) for it, r in zip(expected[k], reply) if r != 1]
    return missing


def missing_via_node(port, d, expected, replica):
    """Every key asked at one node (READONLY first on a replica); MOVED redirects followed once.
    Returns (missing pairs, answered locally, redirected)."""
    conn = node(port)
    if replica:
        conn.execute_command("READONLY")
    keys = list(expected)
    pipe = conn.pipeline(transaction=False)
    for k in keys:
        pipe.execute_command(*d.exists(k, expected[k]))
    replies = pipe.execute(raise_on_error=False)
    missing, local, moved = [], 0, {}
    for k, reply in zip(keys, replies):
        if isinstance(reply, redis.exceptions.MovedError):
            moved.setdefault(int(reply.port), []).append(k)
            continue
        if isinstance(reply, Exception):
            missing.append((k, f"error {reply}"))
            continue
        local += 1
        missing += [(k, it) for it, r in zip(expected[k], reply) if r != 1]
    for target, ks in moved.items():
        p = node(target).pipeline(transaction=False)
        for k in ks:
            p.execute_command(*d.exists(k, expected[k]))
        for k, reply in zip(ks, p.execute(raise_on_error=False)):
            if isinstance(reply, Exception):
                missing.append((k, f"error after MOVED to {target}: {reply}"))
                continue
            missing += [(k, it) for it, r in zip(expected[k], reply) if r != 1]
    return missing, local, sum(len(v) for v in moved.values())


def states_at(port, d, keys, replica):
    """{key: (INFO reply, DEBUG DIGEST-VALUE)} for the keys one node holds (MOVED ones skipped)."""
    conn = node(port)
    if replica:
        conn.execute_command("READONLY")
    pipe = conn.pipeline(transaction=False)
    for k in keys:
        pipe.execute_command(*d.info(k))
        pipe.execute_command("DEBUG", "DIGEST-VALUE", k)
    replies = pipe.execute(raise_on_error=False)
    out = {}
    for i, k in enumerate(keys):
        info, digest = replies[2 * i], replies[2 * i + 1]
        if isinstance(info, redis.exceptions.MovedError):
            continue
        out[k] = (repr(info), repr(digest))
    return out


def states(cluster, d, keys):
    """Every key's state as its master holds it, and each replica's differences from its master."""
    view = nodes_view(cluster.live()[0])
    by_master, merged = {}, {}
    for p in cluster.live():
        if view[p][1] == "master":
            by_master[view[p][0]] = states_at(p, d, keys, False)
            merged.update(by_master[view[p][0]])
    replica_diffs = {}
    for p in cluster.live():
        if view[p][1] == "replica":
            mine = states_at(p, d, keys, True)
            master = by_master.get(view[p][2], {})
            replica_diffs[p] = ([k for k in master if mine.get(k) != master[k]], len(mine))
    return merged, replica_diffs


def check_states(phase, cluster, d, keys, before=None):
    """Replicas hold the same values as their masters (INFO and digest); with `before`, every key's
    value is also unchanged since then. Returns the states."""
    now, replica_diffs = states(cluster, d, keys)
    check(f"{phase}: every key held once by a master ({len(now)} of {len(keys)})", len(now) == len(keys))
    for p, (diff, held) in sorted(replica_diffs.items()):
        check(f"{phase}: replica {p} holds its master's {held} values (INFO + DEBUG DIGEST-VALUE equal)",
              not diff and held > 0, f"{len(diff)} differ, e.g. {diff[:3]}")
    if before is not None:
        changed = [k for k in keys if now.get(k) != before.get(k)]
        check(f"{phase}: all {len(keys)} values unchanged (INFO + DEBUG DIGEST-VALUE)",
              not changed, f"{len(changed)} differ, e.g. {[(k, before.get(k), now.get(k)) for k in changed[:2]]}")
    return now


def verify_everywhere(phase, cluster, d, expected):
    rc = client(cluster.live()[0])
    try:
        miss = missing_via_cluster(rc, d, expected)
    finally:
        rc.close()
    total = sum(len(v) for v in expected.values())
    check(f"{phase}: {total} items answer 1 through RedisCluster", not miss, f"{len(miss)} missing, e.g. {miss[:3]}")
    view = nodes_view(cluster.live()[0])
    for p in cluster.live():
        replica = view[p][1] == "replica"
        miss, local, redirected = missing_via_node(p, d, expected, replica)
        role = "replica" if replica else "master"
        check(f"{phase}: {total} items answer 1 via {role} {p} ({local} keys local, {redirected} MOVED)",
              not miss and local > 0, f"{len(miss)} missing, e.g. {miss[:3]}")


def absent_rate(cluster, d, keys):
    rc = client(cluster.live()[0])
    per_key = ABSENT // len(keys)
    try:
        pipe = rc.pipeline()
        for k in keys:
            pipe.execute_command(*d.exists(k, items_of(k, per_key, "absent")))
        replies = pipe.execute()
    finally:
        rc.close()
    for family in ("bf", "cf"):
        ones = sum(sum(1 for r in reply if r == 1) for k, reply in zip(keys, replies) if k.startswith(family))
        asked = per_key * sum(1 for k in keys if k.startswith(family))
        rate = ones / asked
        check(f"absent items on {family} keys: {ones} of {asked} answer 1 ({rate:.2%} <= {ABSENT_MAX_RATE:.0%})",
              rate <= ABSENT_MAX_RATE)


def phase_merge(cluster):
    """BF.MERGE in the cluster: its two key specs (destination, then sources counted by numkeys)
    route it through RedisCluster when every key shares a slot (a hash tag), and a node refuses
    it with CROSSSLOT when they do not."""
    rc = client(cluster.ports[0])
    try:
        rc.execute_command("BF.RESERVE", "{merge}a", 0.01, 1000)
        rc.execute_command("BF.RESERVE", "{merge}b", 0.01, 1000)
        rc.execute_command("BF.MADD", "{merge}a", *[f"a{i}" for i in range(100)])
        rc.execute_command("BF.MADD", "{merge}b", *[f"b{i}" for i in range(100)])
        merged = rc.execute_command("BF.MERGE", "{merge}dest", 2, "{merge}a", "{merge}b")
        got = rc.execute_command("BF.MEXISTS", "{merge}dest", "a5", "b7", "a99", "b0")
        check("merge: BF.MERGE of hash-tagged keys routed through RedisCluster",
              merged in (b"OK", "OK", True) and list(got) == [1, 1, 1, 1], f"{merged!r} {got!r}")
        keys = node(cluster.ports[0]).command_getkeys("BF.MERGE", "d", 2, "a", "b")
        check("merge: COMMAND GETKEYS lists destination and sources",
              [k.decode() if isinstance(k, bytes) else k for k in keys] == ["d", "a", "b"], repr(keys))
        # Two keys in different slots, sent straight to a node: refused before anything runs.
        a, b = "merge-x{1}", "merge-y{2}"
        assert key_slot(a.encode()) != key_slot(b.encode())
        try:
            node(cluster.ports[0]).execute_command("BF.MERGE", a, 1, b)
            error = ""
        except redis.exceptions.ResponseError as e:
            error = str(e)
        # redis-py drops the CROSSSLOT code from the message it keeps.
        check("merge: keys in two slots answer CROSSSLOT", "don't hash to the same slot" in error, error)
        rc.delete("{merge}a", "{merge}b", "{merge}dest")
    finally:
        rc.close()


def masters(cluster):
    view = nodes_view(cluster.live()[0])
    return {p: v for p, v in view.items() if v[1] == "master" and "fail" not in v[3] and p in cluster.procs}


def phase_reshard(cluster, d, expected, before):
    ms = masters(cluster)
    (src, (src_id, *_)), (dst, (dst_id, *_)) = list(ms.items())[:2]
    moving = 3000
    t = time.time()
    redis_cli("--cluster", "reshard", f"127.0.0.1:{src}", "--cluster-from", src_id, "--cluster-to", dst_id,
              "--cluster-slots", str(moving), "--cluster-yes")
    wait_consistent(cluster.live())
    after = masters(cluster)
    check(f"reshard moved {moving} slots {src}->{dst} in {time.time() - t:.1f}s",
          after[src][4] < ms[src][4] and after[dst][4] > ms[dst][4],
          f"slots before {ms[src][4]}/{ms[dst][4]}, after {after[src][4]}/{after[dst][4]}")
    wait_replicas_synced(cluster.live())
    verify_everywhere("after reshard", cluster, d, expected)
    check_states("after reshard", cluster, d, list(expected), before)

    t = time.time()
    redis_cli("--cluster", "rebalance", f"127.0.0.1:{src}", "--cluster-yes")
    wait_consistent(cluster.live())
    after = masters(cluster)
    spread = max(v[4] for v in after.values()) - min(v[4] for v in after.values())
    check(f"rebalance evened the slots in {time.time() - t:.1f}s ({[v[4] for v in after.values()]})", spread < 200)
    wait_replicas_synced(cluster.live())
    verify_everywhere("after rebalance", cluster, d, expected)
    check_states("after rebalance", cluster, d, list(expected), before)


def phase_failover(cluster, d, expected):
    view = nodes_view(cluster.live()[0])
    victim = min(p for p, v in masters(cluster).items() if v[4] > 0)
    victim_id = view[victim][0]
    replica = next(p for p, v in view.items() if v[1] == "replica" and v[2] == victim_id)
    # Keys owned by the victim: the ones its node answers without MOVED.
    mine = slots_of(victim)
    owned = [k for k in expected if key_slot(k.encode()) in mine]
    acked = {}
    stop = threading.Event()
    batches = [0, 0]  # acknowledged, unacknowledged

    def writer():
        w = node(victim)
        n = 0
        while not stop.is_set():
            batch = {k: items_of(k, 10, f"fo{n}") for k in owned[(n * 10) % len(owned):][:10]}
            n += 1
            try:
                p = w.pipeline(transaction=False)
                for k, its in batch.items():
                    p.execute_command(*d.add(k, its))
                p.execute_command("WAIT", 1, 2000)
                replies = p.execute(raise_on_error=False)
            except redis.RedisError:
                return
            if isinstance(replies[-1], int) and replies[-1] >= 1 and all(
                    Dialect.added(r) for (k, its), r in zip(batch.items(), replies)):
                batches[0] += 1
                for k, its in batch.items():
                    acked.setdefault(k, []).extend(its)
            else:
                batches[1] += 1

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    wait_until("30 acknowledged batches", lambda: batches[0] >= 30, limit=60)
    t = time.time()
    cluster.kill9(victim)
    stop.set()
    th.join(15)
    check(f"failover: writer had {batches[0]} batches acknowledged by WAIT 1 ({sum(map(len, acked.values()))} items)"
          f" when master {victim} got SIGKILL", batches[0] >= 30 and not th.is_alive())

    def promoted():
        v = nodes_view(replica)
        return v[replica][1] == "master" and v[replica][4] > 0
    wait_until("replica promoted", promoted)
    wait_until("cluster state ok", cluster_ok(cluster.live()))
    check(f"failover: replica {replica} promoted, cluster ok in {time.time() - t:.1f}s", True)

    merged = {k: list(v) for k, v in expected.items()}
    for k, its in acked.items():
        merged[k] += its
    rc = client(replica)
    try:
        miss = missing_via_cluster(rc, d, {k: merged[k] for k in acked})
    finally:
        rc.close()
    check("failover: every acknowledged item answers 1 on the promoted replica",
          not miss, f"{len(miss)} missing, e.g. {miss[:3]}")
    verify_everywhere("after failover", cluster, d, merged)

    t = time.time()
    cluster.start(victim)

    def rejoined():
        info = node(victim).info("replication")
        return info["role"] == "slave" and info["master_port"] == replica and info["master_link_status"] == "up"
    wait_until("killed node rejoins as replica", rejoined)
    wait_consistent(cluster.live())
    wait_replicas_synced(cluster.live())
    check(f"failover: killed node {victim} rejoined as replica of {replica} in {time.time() - t:.1f}s", True)
    miss, local, _ = missing_via_node(victim, d, merged, replica=True)
    check(f"failover: rejoined node answers every item ({local} keys local after READONLY)",
          not miss and local > 0, f"{len(miss)} missing, e.g. {miss[:3]}")
    check_states("after rejoin", cluster, d, list(expected))
    return merged


def slots_of(port):
    out = set()
    for s in node(port).execute_command("CLUSTER", "SLOTS"):
        if int(s[2][1]) == port:
            out.update(range(int(s[0]), int(s[1]) + 1))
    return out


GATE_LIMIT_S = 120


def gate_demo(cluster, bloomgate, root, what, users, history, requests, db, *extra):
    """`bloomgate demo feed` with its per-user filters in the cluster (two masters as seeds) and
    its history in SQLite file `db`: the parsed JSON report, or None after a failed check that it
    exits 0 (`what` names the run)."""
    seed = ",".join(f"127.0.0.1:{p}" for p in cluster.ports[:2])
    cmd = [bloomgate, "demo", "feed", "--users", str(users), "--history", str(history),
           "--requests", str(requests), "--concurrency", "2", "--json",
           "--filters", f"redis+cluster://{seed}", *extra,
           "--store", f"sqlite:{os.path.join(root, db)}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=GATE_LIMIT_S)
    check(f"gate: {what} exits 0", r.returncode == 0, r.stderr[-2000:])
    return json.loads(r.stdout) if r.returncode == 0 else None


def gate_keys_by_master(cluster):
    """The gate demo's filter keys in the cluster, by master port."""
    view = nodes_view(cluster.ports[0])
    return {p: list(node(p).scan_iter(match="bloomgate:demo:*", count=1000))
            for p, v in view.items() if v[1] == "master"}


def delete_gate_keys(gate_keys):
    """Deletes what `gate_keys_by_master` found (the later phases check their own keys only)."""
    for p, ks in gate_keys.items():
        for k in ks:
            node(p).delete(k)


def phase_gate(cluster, bloomgate, root):
    """The gate's remote filters on the cluster: every mode shows no duplicate, and the per-user
    filter keys (one per scope, slot by key) live on more than one master."""
    t = time.time()
    report = gate_demo(cluster, bloomgate, root, "demo feed --filters redis+cluster://",
                       40, 60, 400, "gate-history.db")
    if report is None:
        return
    for mode in ["exact", "verify", "trust"]:
        m = report["modes"][mode]
        check(f"gate: {mode} mode: 400 requests, 0 duplicates shown",
              m["requests"] == 400 and m["duplicates_shown"] == 0, str(m))
    gate_keys = gate_keys_by_master(cluster)
    per_master = {p: len(k) for p, k in gate_keys.items()}
    check("gate: WF filter keys on more than one master",
          sum(1 for n in per_master.values() if n > 0) > 1, str(per_master))
    delete_gate_keys(gate_keys)
    print(f"     (gate demo in {time.time() - t:.1f}s; filter keys per master {per_master})", flush=True)

    # A per-process budget smaller than the users' filters: the gate forgets users and finds their
    # filters again (shared filters stay in the cluster for the other gates).
    t = time.time()
    report = gate_demo(cluster, bloomgate, root, "demo feed with a 12 KiB filter budget",
                       20, 30, 2000, "gate-evict.db", "--filter-memory-kib", "12")
    if report is None:
        return
    for mode in ["verify", "trust"]:
        m = report["modes"][mode]
        check(f"gate: {mode} mode under a tiny budget: users forgotten and found again, 0 duplicates",
              m["duplicates_shown"] == 0 and m["evictions"] > 0 and m["history_loads"] >= 20, str(m))
    delete_gate_keys(gate_keys_by_master(cluster))
    print(f"     (gate eviction demo in {time.time() - t:.1f}s)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", required=True, help="path to libbloomgate_module.so")
    ap.add_argument("--bloomgate", help="path to the bloomgate binary: also run the gate phase")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    module = os.path.abspath(args.module)
    if not os.path.exists(module):
        sys.exit(f"no module at {module}")
    d = Dialect()
    root = tempfile.mkdtemp(prefix="bloomgate-cluster-")
    cluster = None

    def on_signal(signum, _frame):
        if signum == signal.SIGALRM:
            raise TimeoutError(f"the whole run took over {TOTAL_LIMIT_S}s")
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(TOTAL_LIMIT_S)
    started = time.time()
    try:
        cluster = Cluster(module, root)
        print(f"cluster: ports {cluster.ports[0]}-{cluster.ports[-1]}, module {module}, dir {root}", flush=True)
        for p in cluster.ports:
            cluster.start(p)
        redis_cli("--cluster", "create", *[f"127.0.0.1:{p}" for p in cluster.ports],
                  "--cluster-replicas", "1", "--cluster-yes")
        wait_consistent(cluster.ports)
        view = nodes_view(cluster.ports[0])
        check("cluster created: 3 masters, 3 replicas",
              sorted(v[1] for v in view.values()) == ["master"] * 3 + ["replica"] * 3, str(view))

        # Replicas get other defaults than their masters: keys auto-created on a master must
        # still reach them with the master's parameters (the replicated BF.INSERT / LOADCHUNK),
        # which the INFO + digest comparisons below check.
        replicas = [p for p, v in view.items() if v[1] == "replica"]
        for p in replicas:
            node(p).execute_command("CONFIG", "SET", *REPLICA_CONFIG)
        got = [node(p).config_get("bf.bf-error-rate").get("bf.bf-error-rate") for p in replicas]
        check(f"replicas {replicas} configured with {' '.join(REPLICA_CONFIG)}",
              all(g is not None and float(g) == 0.05 for g in got), str(got))
        keys = key_names()
        expected = {k: items_of(k) for k in keys}
        rc = client(cluster.ports[0])
        check("module answers BF.ADD/BF.EXISTS through RedisCluster",
              rc.execute_command("BF.ADD", "probe", "a") == 1 and rc.execute_command("BF.EXISTS", "probe", "a") == 1)
        rc.delete("probe")
        t = time.time()
        load(rc, d, keys)
        rc.close()
        print(f"     (loaded in {time.time() - t:.1f}s)", flush=True)
        wait_replicas_synced(cluster.ports)
        verify_everywhere("after load", cluster, d, expected)
        absent_rate(cluster, d, keys)
        before = check_states("after load", cluster, d, keys)
        phase_merge(cluster)

        if args.bloomgate:
            phase_gate(cluster, os.path.abspath(args.bloomgate), root)
        phase_reshard(cluster, d, expected, before)
        phase_failover(cluster, d, expected)
    except Exception as e:  # noqa: BLE001 - any failure is reported with the node logs, then cleaned up
        check("run completed", False, f"{type(e).__name__}: {e}")
        traceback.print_exc()
        if cluster:
            for p in cluster.ports:
                print(f"--- log of {p}:\n{cluster.log_tail(p)}", flush=True)
    finally:
        signal.alarm(0)
        if cluster:
            cluster.stop_all()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"cluster: {passed} passed, {failed} failed ({time.time() - started:.0f}s)", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
