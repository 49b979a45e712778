#!/usr/bin/env python3
"""redis-py's pub/sub API against `bloomgate serve`: subscribe / psubscribe / publish in RESP2
and RESP3, PUBSUB introspection, a keyevent from BF.ADD, and a slow subscriber disconnected at
its output limit.

Usage: redis_py_pubsub.py [--bin PATH_TO_bloomgate] [--port N]
  With --port, talks to a server already running on 127.0.0.1:N (its pub/sub limit and
  notify-keyspace-events are changed). Otherwise starts `bloomgate serve` (from --bin, default
  target/release/bloomgate) on a free loopback port with a temporary data directory.
Exits non-zero on any mismatch.
"""
import os
import socket
import sys
import time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)

check = bgtest.check


def next_message(p, seconds=10):
    """The next message (not a subscription confirmation), or None after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        m = p.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if m is not None:
            return m
    return None


def run(port, protocol):
    tag = f"resp{protocol}"
    r = redis.Redis(port=port, protocol=protocol)
    p = r.pubsub()
    p.subscribe("news")
    p.psubscribe("n*")
    # Wait for both confirmations.
    for _ in range(2):
        p.get_message(timeout=5)
    check(f"{tag} publish count", r.publish("news", "hello"), 2)
    got = sorted(
        (m["type"], m["pattern"], m["channel"], m["data"])
        for m in (next_message(p), next_message(p))
        if m is not None
    )
    check(
        f"{tag} messages",
        got,
        [("message", None, b"news", b"hello"), ("pmessage", b"n*", b"news", b"hello")],
    )
    check(f"{tag} channels", r.pubsub_channels(), [b"news"])
    check(f"{tag} numsub", r.pubsub_numsub("news", "none"), [(b"news", 1), (b"none", 0)])
    check(f"{tag} numpat", r.pubsub_numpat(), 1)

    r.config_set("notify-keyspace-events", "KEA")
    p.psubscribe("__keyevent@0__:*")
    p.get_message(timeout=5)
    r.bf().add(f"bf-{tag}", "item")
    m = next_message(p)
    check(
        f"{tag} keyevent from BF.ADD",
        (m or {}).get("channel"),
        b"__keyevent@0__:bloom.add",
    )
    check(f"{tag} keyevent payload", (m or {}).get("data"), f"bf-{tag}".encode())
    r.config_set("notify-keyspace-events", "")
    p.close()
    r.close()


def slow_subscriber(port):
    r = redis.Redis(port=port)
    r.config_set("client-output-buffer-limit", "pubsub 1mb 256kb 60")
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"SUBSCRIBE firehose\r\n")
    deadline = time.time() + 10
    while r.pubsub_numsub("firehose")[0][1] == 0 and time.time() < deadline:
        time.sleep(0.01)
    message = b"x" * (64 << 10)
    gone = False
    for _ in range(4000):  # at most 256 MB sent; the limit is 1 MB plus the socket buffers
        if r.publish("firehose", message) == 0:
            gone = True
            break
    check("slow subscriber disconnected", gone, True)
    check("no subscriber left", r.pubsub_numsub("firehose"), [(b"firehose", 0)])
    slow.settimeout(10)
    closed = False
    try:
        while slow.recv(1 << 20):
            pass
        closed = True
    except (ConnectionResetError, socket.timeout):
        closed = False
    check("slow subscriber's connection closed", closed, True)
    check("server still answers", r.ping(), True)
    r.config_set("client-output-buffer-limit", "pubsub 32mb 8mb 60")


def main():
    server, port = bgtest.serve_from_args("bloomgate-pypubsub-")
    try:
        run(port, 2)
        run(port, 3)
        slow_subscriber(port)
    finally:
        if server is not None:
            server.close()
    bgtest.finish("all redis-py pub/sub checks passed")


if __name__ == "__main__":
    main()
