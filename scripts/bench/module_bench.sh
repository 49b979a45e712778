#!/usr/bin/env bash
# Throughput inside ONE redis-server with the bloomgate module loaded: BF.ADD/BF.EXISTS/CF.ADD/
# CF.EXISTS against the exact-set commands SADD/SISMEMBER of the same server, driven by
# redis-benchmark on loopback at pipeline 1 and 16. Same process, same network path, same client:
# the ratio is the cost of our command against Redis's own hash-table set.
#
# Usage: scripts/bench/module_bench.sh [path/to/libbloomgate_module.so] [requests at -P 1] [requests at -P 16]
#        (defaults: target/release/libbloomgate_module.so, 200000, 1000000)
# Each measurement is `redis-benchmark -p PORT -c 50 -n N -P P -r 100000 -q CMD key __rand_int__`;
# the commands run interleaved (PING as the request-path ceiling, SADD, BF.ADD, CF.ADD, SISMEMBER,
# BF.EXISTS, CF.EXISTS), the whole sequence twice. Prints the machine's load average (the benchmark shares 2 cores with
# redis-server and with anything else running), one line per measurement, then the mean of the two
# rounds and the ratios against SADD/SISMEMBER.
set -euo pipefail
MODULE=$(realpath "${1:-target/release/libbloomgate_module.so}")
N1=${2:-200000}
N16=${3:-1000000}
D=$(mktemp -d /tmp/bloomgate-modulebench-XXXX)
BGTEST=$(dirname "$0")/../lib/bgtest.py   # free ports, waiting for PING
PORT=$(python3 "$BGTEST" free-port)
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$D" --save "" --appendonly no \
    --loadmodule "$MODULE" >"$D/log" 2>&1 &
PID=$!
trap 'rc=$?; [ $rc -ne 0 ] && { echo "module_bench failed ($rc); redis log:"; tail -20 "$D/log"; }; kill $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
python3 "$BGTEST" wait "$PORT" --pid "$PID" --seconds 10 || { cat "$D/log"; exit 1; }
# Sized for the 100,000 distinct items -r 100000 draws, so no filter scales or fills up.
redis-cli -p "$PORT" BF.RESERVE bf 0.01 200000 >/dev/null
redis-cli -p "$PORT" CF.RESERVE cf 200000 >/dev/null

results=$D/results
echo "redis-server $(redis-server --version | grep -o 'v=[0-9.]*'), module $MODULE, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
run() { # round pipeline requests command [args...]
    local round=$1 pipeline=$2 n=$3 out rps
    shift 3
    out=$(redis-benchmark -p "$PORT" -c 50 -n "$n" -P "$pipeline" -r 100000 -q "$@" 2>&1 | tr '\r' '\n')
    rps=$(grep -o '[0-9.]* requests per second' <<<"$out" | tail -1 | cut -d' ' -f1) ||
        { echo "redis-benchmark $* gave no rate:"; tail -5 <<<"$out"; exit 1; }
    printf 'round %s  P%-3s %-10s %12s req/s\n' "$round" "$pipeline" "$1" "$rps"
    echo "$pipeline $1 $rps" >>"$results"
}
for round in 1 2; do
    for P in 1 16; do
        n=$N1
        [ "$P" = 16 ] && n=$N16
        run "$round" "$P" "$n" PING   # the request path alone: the ceiling any command can reach
        run "$round" "$P" "$n" SADD set __rand_int__
        run "$round" "$P" "$n" BF.ADD bf __rand_int__
        run "$round" "$P" "$n" CF.ADD cf __rand_int__
        run "$round" "$P" "$n" SISMEMBER set __rand_int__
        run "$round" "$P" "$n" BF.EXISTS bf __rand_int__
        run "$round" "$P" "$n" CF.EXISTS cf __rand_int__
    done
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at end"
# Server-side time inside each command (Redis measures the command proc, for a module command
# including the module API's context setup, key open/close and replication bookkeeping).
echo "INFO commandstats (usec_per_call = time inside the command, no network):"
redis-cli -p "$PORT" INFO commandstats | tr -d '\r' |
    grep -iE '^cmdstat_(sadd|sismember|bf\.add|bf\.exists|cf\.add|cf\.exists):' |
    sed -E 's/^cmdstat_([^:]*):calls=([0-9]+),usec=[0-9]+,usec_per_call=([0-9.]+).*/  \1 calls=\2 usec_per_call=\3/'
echo "mean of 2 rounds; ratio = first / second (BF/CF vs SADD/SISMEMBER: target >= 1.00; SADD/SISMEMBER vs PING: above 1.00 is noise)"
awk '{ sum[$1" "$2] += $3; cnt[$1" "$2]++ }
     END {
       split("BF.ADD:SADD CF.ADD:SADD BF.EXISTS:SISMEMBER CF.EXISTS:SISMEMBER SADD:PING SISMEMBER:PING", pairs, " ")
       for (p = 1; p <= 16; p += 15)
         for (i = 1; i <= 6; i++) {
           split(pairs[i], c, ":")
           a = sum[p" "c[1]] / cnt[p" "c[1]]; b = sum[p" "c[2]] / cnt[p" "c[2]]
           printf "P%-3s %-10s %10.0f req/s  %-10s %10.0f req/s  ratio %.2f\n", p, c[1], a, c[2], b, a / b
         }
     }' "$results"
