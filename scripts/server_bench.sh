#!/usr/bin/env bash
# Server throughput, side by side in one run: `bloomgate serve` (BF.ADD/BF.EXISTS/CF.ADD/CF.EXISTS)
# against Debian's redis-server doing the exact-set equivalent (SADD/SISMEMBER), both with an
# append-only log fsynced every second, driven by redis-benchmark on loopback.
#
# Usage: scripts/server_bench.sh [path/to/bloomgate] [requests]   (default: target/release, 300000)
# Prints one `name pipeline req/s` line per measurement.
set -euo pipefail
BIN=${1:-target/release/bloomgate}
N=${2:-300000}
D=$(mktemp -d /tmp/bloomgate-serverbench-XXXX)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
BG=$(port)
RS=$(port)
mkdir -p "$D/bg" "$D/rs"
"$BIN" serve --port "$BG" --dir "$D/bg" --appendfsync everysec >/dev/null 2>&1 &
BG_PID=$!
redis-server --port "$RS" --bind 127.0.0.1 --dir "$D/rs" --save "" --appendonly yes \
    --appendfsync everysec >/dev/null 2>&1 &
RS_PID=$!
trap 'kill $BG_PID $RS_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
for p in "$BG" "$RS"; do
    for _ in $(seq 1 100); do redis-cli -p "$p" PING >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli -p "$BG" BF.RESERVE bench 0.01 1000000 >/dev/null
redis-cli -p "$BG" CF.RESERVE cbench 2000000 >/dev/null

run() { # name port pipeline command...
    local name=$1 p=$2 pipeline=$3
    shift 3
    local rps
    rps=$(redis-benchmark -p "$p" -c 50 -n "$N" -P "$pipeline" -r 1000000 -q "$@" 2>/dev/null |
        tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
    printf '%-22s P%-3s %12s req/s\n' "$name" "$pipeline" "$rps"
}
for P in 1 16; do
    run "bloomgate BF.ADD" "$BG" "$P" BF.ADD bench __rand_int__
    run "bloomgate BF.EXISTS" "$BG" "$P" BF.EXISTS bench __rand_int__
    run "bloomgate CF.ADD" "$BG" "$P" CF.ADD cbench __rand_int__
    run "bloomgate CF.EXISTS" "$BG" "$P" CF.EXISTS cbench __rand_int__
    run "redis SADD" "$RS" "$P" SADD bset __rand_int__
    run "redis SISMEMBER" "$RS" "$P" SISMEMBER bset __rand_int__
done
