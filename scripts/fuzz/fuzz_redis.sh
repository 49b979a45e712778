#!/usr/bin/env bash
# Mutation fuzzing of the module inside Debian's redis-server (forged values once crashed it):
# mutated DUMP payloads, LOADCHUNK streams and RDB files for every registered type, under an
# address-space limit; the server must never die. The default size runs in the test suite; --long runs ten times more.
#
# Usage: scripts/fuzz/fuzz_redis.sh [--long] [--seed N]
set -euo pipefail
cd "$(dirname "$0")/../.."
while [ $# -gt 0 ]; do
    case "$1" in
        --long) export BLOOMGATE_FUZZ_LONG=1 ;;
        --seed) export BLOOMGATE_FUZZ_SEED="$2"; shift ;;
        *) echo "usage: $0 [--long] [--seed N]" >&2; exit 2 ;;
    esac
    shift
done
cargo build --locked -p bloomgate-module
cargo test --locked -p bloomgate-module --test untrusted_input -- --nocapture
