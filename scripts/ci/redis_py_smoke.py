#!/usr/bin/env python3
"""Smoke test: redis-py's r.bf() and r.cf() against `bloomgate serve`, every BFCommands and
CFCommands method.

Usage: redis_py_smoke.py [--bin PATH_TO_bloomgate] [--port N]
  With --port, talks to a server already running on 127.0.0.1:N.
  Otherwise starts `bloomgate serve` (from --bin, default target/release/bloomgate) on a free
  loopback port with a temporary data directory, and stops it afterwards.
Exits non-zero on any mismatch.
"""
import os
import sys

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)

failures = bgtest.failures
check = bgtest.check


def expect_error(name, fn, text):
    try:
        fn()
    except redis.ResponseError as e:
        check(name, str(e), text)
        return
    failures.append(f"{name}: no error")
    print(f"FAIL {name}: no error")


def copy_by_dump(family, commands, source, target, end_data):
    """SCANDUMP `source` to the end (whose data must be `end_data`), LOADCHUNK every chunk into
    `target`; returns the chunks."""
    chunks = []
    it = 0
    while True:
        it, data = commands.scandump(source, it)
        if it == 0:
            check(f"{family} scandump end data", data, end_data)
            return chunks
        chunks.append((it, data))
        # LOADCHUNK replies +OK (no redis-py callback: b"OK").
        check(f"{family} loadchunk {it}", commands.loadchunk(target, it, data) in (b"OK", "OK", True), True)


def run(r):
    bf = r.bf()
    r.flushdb()
    check("create", bf.create("f", 0.01, 1000), True)
    check("reserve nonscaling", bf.reserve("ns", 0.01, 10, noScale=True), True)
    check("reserve expansion", bf.reserve("ex", 0.01, 100, expansion=4), True)
    expect_error("create twice", lambda: bf.create("f", 0.01, 1000), "item exists")
    expect_error("bad error rate", lambda: bf.create("g", 2, 100),
                 "error rate must be in the range (0.000000, 1.000000)")
    check("add new", bf.add("f", "a"), 1)
    check("add again", bf.add("f", "a"), 0)
    check("madd", bf.madd("f", "a", "b", "c"), [0, 1, 1])
    check("insert", bf.insert("ins", ["x", "y"], capacity=500, error=0.001, expansion=2), [1, 1])
    check("insert nocreate existing", bf.insert("ins", ["z"], noCreate=True), [1])
    expect_error("insert nocreate missing", lambda: bf.insert("nope", ["z"], noCreate=True), "not found")
    check("insert nonscaling", bf.insert("ins2", ["x"], noScale=True), [1])
    check("exists", bf.exists("f", "b"), 1)
    check("exists missing item", bf.exists("f", "zzz"), 0)
    check("exists missing key", bf.exists("nokey", "a"), 0)
    check("mexists", bf.mexists("f", "a", "zzz", "c"), [1, 0, 1])
    check("card", bf.card("f"), 3)
    check("card missing", bf.card("nokey"), 0)
    info = bf.info("f")
    check("info capacity", info.capacity, 1000)
    check("info filters", info.filterNum, 1)
    check("info items", info.insertedNum, 3)
    check("info expansion", info.expansionRate, 2)
    default_info = bf.info("ex")
    check("info expansion 4", default_info.expansionRate, 4)
    r.execute_command("BF.RESERVE", "sz", 0.01, 100)
    check("info size 240", bf.info("sz").size, 240)

    # SCANDUMP/LOADCHUNK round trip into a new key.
    for i in range(2000):
        bf.add("f", f"item{i}")
    copy_by_dump("bf", bf, "f", "copy", b"")
    check("copy exists", bf.mexists("copy", *[f"item{i}" for i in range(0, 2000, 97)]), [1] * len(range(0, 2000, 97)))
    check("copy card", bf.card("copy"), bf.card("f"))
    check("copy info", vars(bf.info("copy")), vars(bf.info("f")))
    expect_error("loadchunk bad header", lambda: bf.loadchunk("copy2", 1, b"garbage"), "received bad data")

    # pipeline() uses MULTI/EXEC by default.
    pipe = r.pipeline()
    pipe.bf().add("p", "one")
    pipe.bf().exists("p", "one")
    check("pipeline multi/exec", pipe.execute(), [1, 1])
    check("type", r.type("f"), b"MBbloom--")


def run_cf(r):
    cf = r.cf()
    check("cf create", cf.create("c", 1000), True)
    check("cf reserve options", cf.reserve("c2", 1000, expansion=2, bucket_size=4, max_iterations=50), True)
    expect_error("cf reserve twice", lambda: cf.reserve("c", 1000), "item exists")
    expect_error("cf reserve small", lambda: cf.reserve("c3", 1),
                 "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]")
    check("cf add", cf.add("c", "a"), 1)
    check("cf add again", cf.add("c", "a"), 1)
    check("cf addnx present", cf.addnx("c", "a"), 0)
    check("cf addnx new", cf.addnx("c", "b"), 1)
    check("cf insert", cf.insert("c", ["x", "y"]), [1, 1])
    check("cf insert capacity creates", cf.insert("cnew", ["x"], capacity=100), [1])
    expect_error("cf insert nocreate missing", lambda: cf.insert("cnone", ["x"], nocreate=True), "not found")
    check("cf insertnx", cf.insertnx("c", ["x", "z"]), [0, 1])
    check("cf exists", cf.exists("c", "a"), 1)
    check("cf exists missing key", cf.exists("nokey", "a"), 0)
    check("cf mexists", cf.mexists("c", "a", "nope", "z"), [1, 0, 1])
    check("cf count", cf.count("c", "a"), 2)
    check("cf delete", cf.delete("c", "a"), 1)
    check("cf delete absent", cf.delete("c", "nope"), 0)
    expect_error("cf delete missing key", lambda: cf.delete("nokey", "a"), "Not found")
    info = cf.info("c")
    check("cf info", (info.size, info.bucketNum, info.filterNum, info.insertedNum, info.deletedNum,
                      info.bucketSize, info.expansionRate, info.maxIteration),
          (1080, 512, 1, 5, 1, 2, 1, 20))
    info2 = cf.info("c2")
    check("cf info options", (info2.bucketSize, info2.expansionRate, info2.maxIteration), (4, 2, 50))
    check("cf compact", r.execute_command("CF.COMPACT", "c"), b"OK")
    check("type cf", r.type("c"), b"MBbloomCF")

    # SCANDUMP/LOADCHUNK of a filter that grew sub-filters.
    cf.reserve("g", 64, expansion=2)
    for i in range(1500):
        cf.add("g", f"item{i}")
    chunks = copy_by_dump("cf", cf, "g", "gcopy", None)
    check("cf scandump header is 38 bytes", len(chunks[0][1]), 38)
    check("cf copy info", vars(cf.info("gcopy")), vars(cf.info("g")))
    check("cf copy mexists", cf.mexists("gcopy", *[f"item{i}" for i in range(0, 1500, 31)]),
          [1] * len(range(0, 1500, 31)))
    expect_error("cf loadchunk bad header", lambda: cf.loadchunk("gbad", 1, b"short"), "Invalid header")


def run_redisbloom_82(r):
    """RedisBloom 8.2's metadata, errors and ACLs as redis-py sees them."""
    raw = r.execute_command("COMMAND", "INFO", "bf.add")
    if isinstance(raw, dict):  # parsed by newer redis-py
        arity, cats = raw["bf.add"]["arity"], raw["bf.add"]["acl_categories"]
    else:
        arity, cats = raw[0][1], raw[0][6]
    cats = [c.decode() if isinstance(c, bytes) else c for c in cats]
    check("command info bf.add arity", arity, 3)
    check("command info bf.add categories", cats, ["@write", "@slow", "@bloom"])
    check("acl cat bloom", sorted(r.acl_cat("bloom")),
          sorted(["bf.reserve", "bf.add", "bf.madd", "bf.insert", "bf.exists", "bf.mexists",
                  "bf.info", "bf.card", "bf.debug", "bf.scandump", "bf.loadchunk", "bf.merge"]))
    expect_error("bf reserve arity first", lambda: r.execute_command(
        "BF.RESERVE", "a82", 0.01, 100, "EXPANSION", 2, "EXPANSION", 3),
        "wrong number of arguments for 'bf.reserve' command")
    expect_error("cf insert capacity range", lambda: r.cf().insert("c", ["q"], capacity=3),
                 "Capacity must be in the range [cf-bucket-size * 2, 1073741824]")
    expect_error("config set wording", lambda: r.config_set("cf-max-iterations", 0),
                 "CONFIG SET failed (possibly related to argument 'cf-max-iterations') - "
                 "Value for `cf-max-iterations` must be in the range [1, 65535]")
    r.acl_setuser("bfonly", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@bloom"])
    u = redis.Redis(port=r.connection_pool.connection_kwargs["port"], username="bfonly", password="pw")
    check("acl user may bf.add", u.bf().add("acl82", "x"), 1)
    expect_error("acl user refused cf", lambda: u.cf().add("acl82c", "x"),
                 "User bfonly has no permissions to run the 'cf.add' command")
    u.close()


def main():
    server, port = bgtest.serve_from_args("bloomgate-pysmoke-")
    try:
        r = redis.Redis(port=port)
        run(r)
        run_cf(r)
        run_redisbloom_82(r)
        # RESP3 as well.
        r3 = redis.Redis(port=port, protocol=3)
        check("resp3 exists", r3.bf().exists("f", "a"), True)
        info3 = r3.bf().info("f")  # RESP3: a map, returned as a dict
        check("resp3 info capacity", info3.get("Capacity", info3.get(b"Capacity")), r.bf().info("f").capacity)
        check("resp3 cf exists", r3.cf().exists("c", "b"), True)
        check("resp3 cf count", r3.cf().count("c", "b"), 1)
        cfinfo3 = r3.cf().info("c")
        check("resp3 cf info size", cfinfo3.get("Size", cfinfo3.get(b"Size")), 1080)
    finally:
        if server is not None:
            check("clean shutdown on SIGTERM", server.stop("terminate"), 0)
            server.close()
    bgtest.finish("all redis-py checks passed")


if __name__ == "__main__":
    main()
