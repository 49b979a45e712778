#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a given number of seconds each, one after another
# (one libFuzzer process at a time), after writing the seed corpus (real filter images, real
# BF/CF SCANDUMPs, RESP requests). Crashers land in fuzz/artifacts/<target>/; keep the minimised
# ones as regression tests under crates/*/tests/fuzz_regressions/.
#
# Usage: scripts/fuzz/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 600 s, all targets)
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz --locked).
set -euo pipefail
cd "$(dirname "$0")/../../fuzz"

SECONDS_PER_TARGET=${1:-600}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(resp_parser bf_loadchunk cf_loadchunk core_reader rdb_payload)
fi

# Largest input per target: RESP lines past the 64 KiB inline limit, dumps of a few links.
max_len() {
    case "$1" in
        resp_parser) echo 131072 ;;
        bf_loadchunk | cf_loadchunk) echo 1048576 ;;
        rdb_payload) echo 65536 ;;
        *) echo 262144 ;;
    esac
}

cargo run --quiet --example seeds
mkdir -p artifacts/logs
status=0
for target in "${TARGETS[@]}"; do
    echo "== $target: ${SECONDS_PER_TARGET}s"
    if cargo +nightly fuzz run "$target" -- \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
        -max_len="$(max_len "$target")" -print_final_stats=1 >"artifacts/logs/$target.log" 2>&1; then
        grep -E '^Done|stat::number_of_executed_units|stat::peak_rss_mb' "artifacts/logs/$target.log" || true
        grep -E '#[0-9]+[[:space:]]+(DONE|pulse)' "artifacts/logs/$target.log" | tail -1 || true
    else
        status=1
        echo "$target found a crash: see fuzz/artifacts/logs/$target.log and fuzz/artifacts/$target/"
        grep -E 'panicked at|ERROR: libFuzzer|SUMMARY' "artifacts/logs/$target.log" | head -5 || true
    fi
done
exit $status
