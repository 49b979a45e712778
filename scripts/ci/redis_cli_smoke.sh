#!/usr/bin/env bash
# Smoke test: redis-cli against `bloomgate serve` (BF.* and CF.* replies and errors, keyspace, INFO,
# pipelining via --pipe, SAVE and restart).
# Usage: scripts/ci/redis_cli_smoke.sh [path/to/bloomgate]   (default target/release/bloomgate)
# Needs redis-cli (apt-get install -y redis-tools). Exits non-zero on any mismatch.
set -euo pipefail

BIN=${1:-target/release/bloomgate}
DATA=$(mktemp -d /tmp/bloomgate-clismoke-XXXXXX)
PID=
FAILS=0

cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$DATA"
}
trap cleanup EXIT

# A free port, and waiting until a server answers PING there (scripts/lib).
BGTEST=$(dirname "$0")/../lib/bgtest.py

start() {  # another process may take the free port first: five tries
    for _ in 1 2 3 4 5; do
        PORT=$(python3 "$BGTEST" free-port)
        "$BIN" serve --port "$PORT" --dir "$DATA" 2>>"$DATA/server.log" &
        PID=$!
        if python3 "$BGTEST" wait "$PORT" --pid "$PID" --seconds 30; then return 0; fi
        kill "$PID" 2>/dev/null || true
    done
    echo "could not start $BIN" >&2
    exit 1
}

cli() { redis-cli -p "$PORT" "$@"; }

# expect "<expected output>" redis-cli args...
expect() {
    local want=$1; shift
    local got
    got=$(cli "$@" 2>&1)
    if [ "$got" = "$want" ]; then
        echo "ok   $*"
    else
        echo "FAIL $*"; echo "  want: $want"; echo "  got:  $got"
        FAILS=$((FAILS + 1))
    fi
}

start
expect "PONG" PING
expect "OK" BF.RESERVE f 0.01 100
expect "ERR item exists" BF.RESERVE f 0.01 100
expect "ERR bad error rate" BF.RESERVE g x 100
expect "Nonscaling filters cannot expand" BF.RESERVE g 0.01 100 NONSCALING EXPANSION 2
expect "1" BF.ADD f hello
expect "0" BF.ADD f hello
expect "$(printf '0\n1\n1')" BF.MADD f hello a b
expect "1" BF.EXISTS f a
expect "0" BF.EXISTS f nope
expect "$(printf '1\n0')" BF.MEXISTS f a nope
expect "3" BF.CARD f
expect "$(printf 'Capacity\n100\nSize\n240\nNumber of filters\n1\nNumber of items inserted\n3\nExpansion rate\n2')" BF.INFO f
expect "240" BF.INFO f SIZE
expect "Invalid information value" BF.INFO f bogus
expect "ERR not found" BF.INFO missing
expect "$(printf '1\n1')" BF.INSERT i CAPACITY 10 ERROR 0.001 ITEMS x y
expect "Unknown argument received" BF.INSERT i BOGUS ITEMS x
expect "ERR wrong number of arguments for 'bf.add' command" BF.ADD f
expect "ERR unknown command 'NOPE', with args beginning with: 'x' " NOPE x
expect "MBbloom--" TYPE f
expect "OK" CF.RESERVE c 1000
expect "1" CF.ADD c hello
expect "0" CF.ADDNX c hello
expect "1" CF.EXISTS c hello
expect "1" CF.COUNT c hello
expect "$(printf 'Size\n1080\nNumber of buckets\n512\nNumber of filters\n1\nNumber of items inserted\n1\nNumber of items deleted\n0\nBucket size\n2\nExpansion rate\n1\nMax iterations\n20')" CF.INFO c
expect "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]" CF.RESERVE d 1
expect "MBbloomCF" TYPE c
expect "OK" SAVE

# Pipelined adds through redis-cli --pipe.
for i in $(seq 1 5000); do printf 'BF.ADD piped item%s\r\n' "$i"; done | cli --pipe >/dev/null
expect "1" BF.EXISTS piped item1
expect "1" BF.EXISTS piped item4999

# Restart: data survives SHUTDOWN (final snapshot) and reload.
cli SHUTDOWN >/dev/null 2>&1 || true
wait "$PID" || { echo "FAIL server exit status"; FAILS=$((FAILS + 1)); }
PID=
start
expect "3" BF.CARD f
expect "1" BF.EXISTS piped item1
expect "1" BF.EXISTS i y
expect "1" CF.EXISTS c hello
if ! cli INFO persistence | grep -q '^aof_enabled:1'; then echo "FAIL INFO persistence"; FAILS=$((FAILS + 1)); fi

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS failure(s)"
    exit 1
fi
echo "all redis-cli checks passed"
