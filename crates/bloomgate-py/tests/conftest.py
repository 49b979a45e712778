"""Shared fixtures: the `bloomgate` CLI binary for the file round trips, a PostgreSQL server for
the gate, a redis-server with the module for the gate's shared filters. Under BLOOMGATE_NO_SKIP=1
(CI) a skipped test is reported as failed; elsewhere each skip is also recorded in
$BLOOMGATE_SKIP_LOG when set (scripts/lib/bgtest.py's convention)."""

import os
import pathlib
import shutil
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip (pytest.skip, importorskip, skipif) fails the test under BLOOMGATE_NO_SKIP=1."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    note = "SKIPPED %s: %s" % (item.nodeid, reason)
    if os.environ.get("BLOOMGATE_NO_SKIP") == "1":
        report.outcome = "failed"
        report.longrepr = note + "; BLOOMGATE_NO_SKIP=1 (CI) requires it to run"
    elif os.environ.get("BLOOMGATE_SKIP_LOG"):
        with open(os.environ["BLOOMGATE_SKIP_LOG"], "a") as log:
            log.write(note.replace("\n", " ") + "\n")


@pytest.fixture(scope="session")
def cli():
    """Path of the `bloomgate` binary: $BLOOMGATE_BIN, target/debug, target/release or PATH."""
    candidates = [
        os.environ.get("BLOOMGATE_BIN"),
        REPO / "target" / "debug" / "bloomgate",
        REPO / "target" / "release" / "bloomgate",
        shutil.which("bloomgate"),
    ]
    given = os.environ.get("BLOOMGATE_BIN")
    if given and not pathlib.Path(given).is_file():
        pytest.fail("BLOOMGATE_BIN=%s is not a file" % given)
    for c in candidates:
        if c and pathlib.Path(c).is_file():
            return str(c)
    pytest.skip("bloomgate CLI not built (cargo build -p bloomgate-cli)")


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server's URL: $BLOOMGATE_TEST_POSTGRES_URL, else a throwaway server started
    for the session (scripts/lib/bgtest.py's `Postgres`: initdb + pg_ctl on a loopback port).
    Skipped when PostgreSQL is not installed (a failure under BLOOMGATE_NO_SKIP=1)."""
    given = os.environ.get("BLOOMGATE_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    sys.path.insert(0, str(REPO / "scripts" / "lib"))
    import bgtest

    if bgtest.postgres_bin_dir() is None:
        pytest.skip("PostgreSQL (initdb, pg_ctl) is not installed (bash .ci/setup installs postgresql)")
    with bgtest.Postgres() as pg:
        yield pg.url


@pytest.fixture(scope="session")
def filter_server():
    """`resp://127.0.0.1:PORT` of a redis-server running the module built in target/ (or
    $BLOOMGATE_MODULE), for the gate's remote filters. Skipped when redis-server or the module
    is missing (a failure under BLOOMGATE_NO_SKIP=1)."""
    module = os.environ.get("BLOOMGATE_MODULE") or str(REPO / "target" / "debug" / "libbloomgate_module.so")
    missing = [what for what, ok in [("redis-server", shutil.which("redis-server")),
                                     (module, pathlib.Path(module).is_file())] if not ok]
    if missing:
        pytest.skip("missing for the shared filters: %s (cargo build -p bloomgate-module)" % missing)
    sys.path.insert(0, str(REPO / "scripts" / "lib"))
    import bgtest

    with bgtest.Server(bgtest.redis_argv("redis-server", module), prefix="bloomgate-py-filters-") as server:
        yield "resp://127.0.0.1:%d" % server.port
