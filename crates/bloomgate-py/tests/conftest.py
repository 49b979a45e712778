"""Shared fixtures: the `bloomgate` CLI binary for the file round trips, a PostgreSQL server for
the gate, a redis-server with the module for the gate's shared filters."""

import os
import pathlib
import shutil
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def cli():
    """Path of the `bloomgate` binary: $BLOOMGATE_BIN, target/debug, target/release or PATH."""
    candidates = [
        os.environ.get("BLOOMGATE_BIN"),
        REPO / "target" / "debug" / "bloomgate",
        REPO / "target" / "release" / "bloomgate",
        shutil.which("bloomgate"),
    ]
    for c in candidates:
        if c and pathlib.Path(c).is_file():
            return str(c)
    if os.environ.get("BLOOMGATE_REQUIRE_CLI"):
        pytest.fail("the bloomgate CLI is required (BLOOMGATE_REQUIRE_CLI) but was not found")
    pytest.skip("bloomgate CLI not built (cargo build -p bloomgate-cli)")


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server's URL: $BLOOMGATE_TEST_POSTGRES_URL, else a throwaway server started
    for the session (scripts/lib/bgtest.py's `Postgres`: initdb + pg_ctl on a loopback port).
    Skipped when PostgreSQL is not installed, unless BLOOMGATE_REQUIRE_POSTGRES=1 (CI)."""
    given = os.environ.get("BLOOMGATE_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    sys.path.insert(0, str(REPO / "scripts" / "lib"))
    import bgtest

    if bgtest.postgres_bin_dir() is None:
        if os.environ.get("BLOOMGATE_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL is required (BLOOMGATE_REQUIRE_POSTGRES=1) but initdb/pg_ctl were not found")
        pytest.skip("PostgreSQL (initdb, pg_ctl) is not installed (bash .ci/setup installs postgresql)")
    with bgtest.Postgres() as pg:
        yield pg.url


@pytest.fixture(scope="session")
def filter_server():
    """`resp://127.0.0.1:PORT` of a redis-server running the module built in target/ (or
    $BLOOMGATE_MODULE), for the gate's remote filters. Skipped when redis-server or the module
    is missing, unless BLOOMGATE_REQUIRE_CLI is set (CI)."""
    module = os.environ.get("BLOOMGATE_MODULE") or str(REPO / "target" / "debug" / "libbloomgate_module.so")
    missing = [what for what, ok in [("redis-server", shutil.which("redis-server")),
                                     (module, pathlib.Path(module).is_file())] if not ok]
    if missing:
        if os.environ.get("BLOOMGATE_REQUIRE_CLI"):
            pytest.fail("needed for the shared filters: %s (cargo build -p bloomgate-module)" % missing)
        pytest.skip("missing for the shared filters: %s" % missing)
    sys.path.insert(0, str(REPO / "scripts" / "lib"))
    import bgtest

    with bgtest.Server(bgtest.redis_argv("redis-server", module), prefix="bloomgate-py-filters-") as server:
        yield "resp://127.0.0.1:%d" % server.port
