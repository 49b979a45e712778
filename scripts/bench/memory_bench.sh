#!/usr/bin/env bash
# The memory and snapshot rows (BENCHMARKS.md, "Snapshots and memory"): bytes per
# default BF.ADD key, used_memory / MEMORY USAGE against resident memory, write latency and peak
# resident memory during a BGSAVE of a 138 MB filter, and the temp file a killed BGSAVE leaves.
# Bounded (fixed counts, deadlines); about a minute. Needs redis-py (.ci/setup installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p bloomgate-cli
exec python3 scripts/bench/memory_bench.py "$@"
