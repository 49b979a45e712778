#!/usr/bin/env python3
"""valkey-bloom's own integration tests (pytest, its valkey-test-framework) against a Bloom module
in Valkey: ours by default, valkey-bloom's `.so` for comparison. Fetches nothing: the test files
come from a directory (--tests) whose every file must match tests/valkey-bloom/MANIFEST.sha256
(valkey-bloom at the commit tests/valkey-bloom/README.md names), the Python packages from the
virtualenv `.ci/setup` makes (target/valkey-bloom-venv: valkey-py and pytest at the versions the
README gives), the server from PATH (Debian's valkey-server 8.0.1).

    python3 scripts/ci/valkey_bloom_tests.py --tests DIR \\
        --module-args 'DIALECT valkey-bloom-0.1'                              # the judge
    python3 scripts/ci/valkey_bloom_tests.py --tests DIR                      # 1.0's dialect
    python3 scripts/ci/valkey_bloom_tests.py --tests DIR --valkey-bloom PATH/libvalkey_bloom.so
    python3 scripts/ci/valkey_bloom_tests.py --tests DIR --module-args 'DIALECT valkey-bloom-0.1' \\
        --expect tests/valkey-bloom/expected/bloomgate-valkey-bloom-0.1.txt   # as CI would

The tests read the server binary from `.build/binaries/$SERVER_VERSION/valkey-server` beside
them and the module (with its load arguments: words after the path) from $MODULE_PATH; the copy
of the tests in a temporary directory gets both. valkey_bloom_loopback.py (a pytest plugin, next
to this file) keeps every server they start on 127.0.0.1.

Prints one line per test (PASS / FAIL with the first line of why), then `valkey-bloom tests: N
passed, M failed`. Exit status 1 when a test fails, or, with --expect FILE (lines `<test id>
pass|fail`), when any outcome differs from the file's (so a newly passing test is reported too).
"""

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import bgtest  # noqa: E402  (scripts/lib, found from this file)

MANIFEST = os.path.join(REPO, "tests", "valkey-bloom", "MANIFEST.sha256")


def manifest():
    """{relative path: sha256} of the test files the harness runs."""
    out = {}
    with open(MANIFEST) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                digest, path = line.split(None, 1)
                out[path] = digest
    return out


def verify(tests_dir):
    """Problems with `tests_dir` against the manifest (missing or changed files), as lines."""
    bad = []
    for path, digest in manifest().items():
        full = os.path.join(tests_dir, path)
        if not os.path.isfile(full):
            bad.append("missing: " + path)
            continue
        with open(full, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != digest:
                bad.append("differs from the manifest: " + path)
    return bad


def server_version(server):
    """"8.0.1" from `valkey-server --version` ("Valkey server v=8.0.1 sha=...")."""
    out = subprocess.run([server, "--version"], capture_output=True, text=True, check=True).stdout
    for word in out.split():
        if word.startswith("v="):
            return word[2:]
    raise RuntimeError("no version in %r" % out)


def preflight(server, module, module_args):
    """None if Valkey starts with the module (and its load arguments), else the log's end: the
    tests would otherwise wait a minute per test for a server that never comes up."""
    try:
        bgtest.Server(bgtest.redis_argv(server, module, *module_args.split()),
                      prefix="bloomgate-vkb-preflight-", seconds=30).close()
        return None
    except RuntimeError as e:
        return str(e)


def results(junit):
    """[(test id, outcome "pass"/"fail"/"skip", first line of why)] from pytest's JUnit XML."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module, _, cls = case.get("classname", "").rpartition(".")
        test_id = "%s.py::%s::%s" % (module.replace(".", "/"), cls, case.get("name"))
        outcome, why = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "fail"
                why = (child.get("message") or child.text or child.tag).strip().splitlines()[0]
                if child.tag == "error":
                    why = "error in setup/teardown: " + why
                break
            if child.tag == "skipped":
                outcome, why = "skip", (child.get("message") or "").strip()
        out.append((test_id, outcome, why))
    return out


def expectations(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                test_id, outcome = line.split()
                out[test_id] = outcome
    return out


def run(args, work, server, version, module, module_args):
    """Runs the tests in the temporary directory `work`; the exit status."""
    copy = os.path.join(work, "tests")
    os.makedirs(copy)
    for path in manifest():
        os.makedirs(os.path.dirname(os.path.join(copy, path)), exist_ok=True)
        shutil.copy(os.path.join(args.tests, path), os.path.join(copy, path))
    binaries = os.path.join(copy, ".build", "binaries", version)
    os.makedirs(binaries)
    os.symlink(server, os.path.join(binaries, "valkey-server"))

    env = dict(os.environ)
    env.update({
        "SERVER_VERSION": version,
        "MODULE_PATH": " ".join([module] + module_args.split()),
        "PYTHONPATH": HERE,  # the loopback plugin
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    junit = os.path.join(work, "junit.xml")
    log_path = os.path.join(work, "pytest.log")
    argv = [args.python, "-m", "pytest", "-p", "valkey_bloom_loopback", "-p", "no:cacheprovider",
            "-v", "--junitxml", junit, "tests/"]
    if args.keyword:
        argv += ["-k", args.keyword]
    label = "valkey-bloom (%s)" % module if args.valkey_bloom else \
        "%s%s" % (module, (" " + module_args) if module_args else "")
    print("== valkey-bloom's tests in Valkey %s against %s" % (version, label), flush=True)
    started = time.time()
    with open(log_path, "w") as log:
        # Its own session, so every server the tests leave behind goes with it at the end.
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
        try:
            proc.wait(args.timeout)
        except subprocess.TimeoutExpired:
            print("timed out after %g s" % args.timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    with open(log_path, errors="replace") as f:
        output = f.read()
    if args.verbose:
        print(output)
    if not os.path.exists(junit):
        print(output[-4000:])
        sys.exit("pytest wrote no results (exit status %s); its output ends above" % proc.returncode)

    outcomes = results(junit)
    for test_id, outcome, why in outcomes:
        print("%-4s %s%s" % (outcome.upper(), test_id, ("  -- " + why[:160]) if why else ""))
    passed = sum(1 for _, o, _ in outcomes if o == "pass")
    failed = len(outcomes) - passed
    print("valkey-bloom tests: %d passed, %d failed (%.0f s)" % (passed, failed, time.time() - started))
    status = 0
    if args.expect:
        want = expectations(args.expect)
        got = {t: o for t, o, _ in outcomes}
        # With -k only the tests that ran are compared.
        ids = sorted(set(got) if args.keyword else set(want) | set(got))
        diff = ["%s: expected %s, got %s" % (t, want.get(t, "-"), got.get(t, "not run"))
                for t in ids if want.get(t) != got.get(t)]
        if diff:
            print("outcomes differ from %s:\n  %s" % (args.expect, "\n  ".join(diff)))
            status = 1
        else:
            print("outcomes as %s expects" % args.expect)
    elif failed:
        status = 1
    return status


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", default=os.environ.get("BLOOMGATE_VALKEY_BLOOM_TESTS",
                                                     os.path.join(REPO, "tests", "valkey-bloom", "tests")),
                   help="valkey-bloom's tests/ directory (default $BLOOMGATE_VALKEY_BLOOM_TESTS, "
                        "else tests/valkey-bloom/tests)")
    p.add_argument("--module", default=os.path.join(REPO, "target", "debug", "libbloomgate_module.so"))
    p.add_argument("--module-args", default=os.environ.get("BLOOMGATE_VALKEY_BLOOM_MODULE_ARGS", ""),
                   help="load arguments after the module's path (e.g. 'DIALECT valkey-bloom-0.1')")
    p.add_argument("--valkey-bloom", metavar="SO",
                   help="run against valkey-bloom's .so instead (no load arguments)")
    p.add_argument("--server", default="valkey-server")
    p.add_argument("--python", default=os.path.join(REPO, "target", "valkey-bloom-venv", "bin", "python"),
                   help="a Python with the pinned valkey-py and pytest (made by .ci/setup)")
    p.add_argument("--expect", help="file of `<test id> pass|fail` lines the outcomes must match")
    p.add_argument("-k", dest="keyword", help="pytest -k expression (a subset of the tests)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds for the whole run")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    p.add_argument("--verbose", action="store_true", help="print pytest's whole output")
    args = p.parse_args()

    module, module_args = args.module, args.module_args
    if args.valkey_bloom:
        module, module_args = args.valkey_bloom, ""
    module = os.path.abspath(module)
    if not os.path.isfile(module):
        sys.exit("no module at %s (cargo build -p bloomgate-module builds ours)" % module)
    if " " in module:
        sys.exit("the tests split $MODULE_PATH on spaces: the module's path must have none")
    server = shutil.which(args.server) or (args.server if os.path.isfile(args.server) else None)
    if server is None:
        sys.exit("no %s on PATH (bash .ci/setup installs Debian's valkey-server)" % args.server)
    if not os.path.isfile(args.python):
        sys.exit("no %s: bash .ci/setup makes the virtualenv with valkey-py and pytest" % args.python)
    tests_dir = args.tests = os.path.abspath(args.tests)
    bad = verify(tests_dir)
    if bad:
        sys.exit("valkey-bloom's tests in %s are not the pinned ones (tests/valkey-bloom/README.md):\n  %s"
                 % (tests_dir, "\n  ".join(bad)))
    version = server_version(server)
    failure = preflight(server, module, module_args)
    if failure:
        sys.exit("Valkey %s does not start with %s %s:\n%s" % (version, module, module_args, failure))

    work = tempfile.mkdtemp(prefix="bloomgate-vkb-tests-")
    try:
        return run(args, work, server, version, module, module_args)
    finally:
        if args.keep:
            print("kept %s (pytest.log, junit.xml, tests/test-data)" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
