#!/usr/bin/env python3
"""The gate over RESP from other languages' clients, against one `bloomgate serve --gate-store
sqlite:...`: the Go example (examples/go/gatefeed, over redigo, built in GOPATH mode against
Debian's golang-github-gomodule-redigo-dev: no module download) runs a smaller feed simulation
and must report 0 duplicates; node-redis runs scripts/ci/node/gate_node_test.js (node-redis is
installed with npm into target/node-redis once).

Usage: gate_clients.py [--bin target/debug/bloomgate] [--requests N]
A client whose toolchain is missing goes through bgtest.skip_or_fail (a failure under CI).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GOPATH = "/usr/share/gocode"


def run(argv, failures, what, **kw):
    print("$ " + " ".join(argv))
    done = subprocess.run(argv, **kw)
    if done.returncode != 0:
        failures.append("%s exited with %d" % (what, done.returncode))
    return done.returncode == 0


def go_client(port, requests, scratch, failures):
    redigo = os.path.join(GOPATH, "src/github.com/gomodule/redigo/redis")
    if not shutil.which("go") or not os.path.isdir(redigo):
        return bgtest.skip_or_fail("the gate's Go (redigo) client test",
                                   "golang-go and golang-github-gomodule-redigo-dev are not installed "
                                   "(bash .ci/setup installs them)")
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH, GOCACHE=os.path.join(scratch, "gocache"),
               GOFLAGS="")
    binary = os.path.join(scratch, "gatefeed")
    if run(["go", "build", "-o", binary, "./examples/go/gatefeed"], failures, "go build", cwd=ROOT, env=env):
        run([binary, "-addr", "127.0.0.1:%d" % port, "-requests", str(requests)], failures, "gatefeed")


def node_client(port, failures):
    try:
        modules, why = bgtest.node_redis()
    except RuntimeError as e:
        return failures.append(str(e))
    if modules is None:
        return bgtest.skip_or_fail("the gate's node-redis client test", why + " (bash .ci/setup installs them)")
    env = dict(os.environ, NODE_PATH=modules)
    run(["node", os.path.join(ROOT, "scripts/ci/node/gate_node_test.js"), str(port)], failures, "node-redis test",
        env=env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/bloomgate")
    ap.add_argument("--requests", type=int, default=1000)
    args = ap.parse_args()
    failures = []
    scratch = tempfile.mkdtemp(prefix="bloomgate-gateclients-")
    try:
        argv = bgtest.serve_argv(args.bin, "--gate-store", "sqlite:" + os.path.join(scratch, "seen.db"))
        with bgtest.Server(argv, prefix="bloomgate-gateclients-", seconds=60) as server:
            go_client(server.port, args.requests, scratch, failures)
            node_client(server.port, failures)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for f in failures:
        print("FAIL " + f)
    if failures:
        sys.exit(1)
    print("gate clients: ok")


if __name__ == "__main__":
    main()
