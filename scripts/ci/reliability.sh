#!/usr/bin/env bash
# The reliability suite of `bloomgate serve` (crates/bloomgate-server/tests/reliability.rs; each server is a
# child process: the test binary runs itself as one).
# `.ci/run` runs its bounded short form as part of `cargo test --workspace`; this runs it alone,
# with `--long` for more kill -9 / SIGTERM rounds and a larger corruption matrix. The full-disk
# tests mount a tmpfs and need root (they are skipped, loudly, otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--long" ]; then
  export BLOOMGATE_RELIABILITY_LONG=1
fi
cargo test --locked -p bloomgate-server --test reliability -- --test-threads=1 --nocapture
