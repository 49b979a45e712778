#!/usr/bin/env python3
"""node-redis' pub/sub API against `bloomgate serve` (scripts/ci/node/pubsub_node_test.js):
subscribe / pSubscribe / unsubscribe in RESP2 and RESP3, PUBSUB introspection and a keyevent
from BF.ADD; the node-redis twin of redis_py_pubsub.py. node-redis is installed with npm into
target/node-redis once.

Usage: node_pubsub.py [--bin PATH_TO_bloomgate] [--port N]
  With --port, talks to a server already running on 127.0.0.1:N (its notify-keyspace-events is
  changed). Otherwise starts `bloomgate serve` (from --bin, default target/release/bloomgate) on
  a free loopback port with a temporary data directory.
Without node and npm it goes through bgtest.skip_or_fail (a failure under CI, where .ci/setup
installs them). Exits non-zero on any mismatch.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join("target", "release", "bloomgate"))
    ap.add_argument("--port", type=int)
    args = ap.parse_args()
    modules, why = bgtest.node_redis()
    if modules is None:
        bgtest.skip_or_fail("node-redis pub/sub test", why + " (bash .ci/setup installs them)")
        return 0
    script = os.path.join(bgtest.ROOT, "scripts", "ci", "node", "pubsub_node_test.js")
    env = dict(os.environ, NODE_PATH=modules)
    server, port = bgtest.serve_unless_port(args.bin, args.port, "bloomgate-nodepubsub-")
    try:
        done = subprocess.run(["node", script, str(port)], env=env, timeout=120)
    finally:
        if server is not None:
            server.close()
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
