"""Shared fixtures: the `bloomgate` CLI binary for the file round trips."""

import os
import pathlib
import shutil

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
