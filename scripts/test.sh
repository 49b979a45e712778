#!/usr/bin/env bash
# The test suite: every crate's unit, property, statistical and integration tests, then the
# real-client smoke tests (redis-cli, redis-py) against a real `bloomgate serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked
cargo build --release --locked -p bloomgate-cli
for smoke in scripts/smoke_*.sh; do
  [ -e "$smoke" ] || continue
  echo "== $smoke"
  bash "$smoke" target/release/bloomgate
done
