#!/usr/bin/env bash
# Server throughput and latency, side by side in one run: `bloomgate serve`
# (BF.ADD/BF.EXISTS/CF.ADD/CF.EXISTS) against Debian's redis-server doing the exact-set
# equivalent (SADD/SISMEMBER), both with an append-only log fsynced every second, driven by
# redis-benchmark on loopback. For each pipeline depth (-P 1, -P 16) and client count (-c 1, -c 50,
# -c 500) the two servers are measured interleaved: BF.ADD, SADD, CF.ADD, BF.EXISTS, SISMEMBER,
# CF.EXISTS. Request counts are sized so the whole run stays within about 4 minutes.
#
# Usage: scripts/bench/server_bench.sh [path/to/bloomgate] [scale]   (default: target/release, 1)
#   scale multiplies every request count (0.2 for a quick look).
# Prints one line per measurement: req/s, p50 and p99 latency (ms, from redis-benchmark --csv),
# the server's CPU time per request (user + system over all its threads, from /proc: the figure
# least disturbed by other load on a shared machine), and for bloomgate rows the ratio to Redis'
# req/s and whether its p99 is at most Redis'.
set -euo pipefail
BIN=${1:-target/release/bloomgate}
SCALE=${2:-1}
D=$(mktemp -d /tmp/bloomgate-serverbench-XXXX)
BGTEST=$(dirname "$0")/../lib/bgtest.py   # free ports, waiting for PING
{ read -r BG; read -r RS; } < <(python3 "$BGTEST" free-port 2)
mkdir -p "$D/bg" "$D/rs"
"$BIN" serve --port "$BG" --dir "$D/bg" --appendfsync everysec >/dev/null 2>&1 &
BG_PID=$!
redis-server --port "$RS" --bind 127.0.0.1 --dir "$D/rs" --save "" --appendonly yes \
    --appendfsync everysec --maxclients 1000 >/dev/null 2>&1 &
RS_PID=$!
trap 'kill $BG_PID $RS_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
python3 "$BGTEST" wait "$BG" --pid "$BG_PID" --seconds 10
python3 "$BGTEST" wait "$RS" --pid "$RS_PID" --seconds 10
redis-cli -p "$BG" BF.RESERVE bench 0.01 1000000 >/dev/null
redis-cli -p "$BG" CF.RESERVE cbench 2000000 >/dev/null
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) vCPUs; redis-benchmark shares them)"

# Requests per measurement, by pipeline depth and client count.
requests() { # pipeline clients
    local n
    case "$1/$2" in
    1/1) n=20000 ;;
    1/*) n=60000 ;;
    16/1) n=200000 ;;
    *) n=400000 ;;
    esac
    python3 -c "print(max(1000, int($n * $SCALE)))"
}

# CPU time (clock ticks) a process has used, all threads.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

REDIS_RPS=0
REDIS_P99=0
run() { # name pid port pipeline clients command...
    local name=$1 pid=$2 p=$3 pipeline=$4 clients=$5
    shift 5
    local csv rps p50 p99 n t0 cpu verdict=""
    n=$(requests "$pipeline" "$clients")
    t0=$(cpu_ticks "$pid")
    csv=$(redis-benchmark -p "$p" -c "$clients" -n "$n" \
        -P "$pipeline" -r 1000000 --csv "$@" 2>/dev/null | tail -1 | tr -d '"')
    cpu=$(python3 -c "print(f'{($(cpu_ticks "$pid") - $t0) * 1e6 / $TICK / $n:5.1f}')")
    rps=$(cut -d, -f2 <<<"$csv")
    p50=$(cut -d, -f5 <<<"$csv")
    p99=$(cut -d, -f7 <<<"$csv")
    if [[ $name == redis* ]]; then
        REDIS_RPS=$rps
        REDIS_P99=$p99
    else
        verdict=$(python3 -c "r=$rps/$REDIS_RPS; print(f'{r:5.2f}x', 'p99<=redis' if $p99 <= $REDIS_P99 else 'p99>redis')")
    fi
    printf '%-20s P%-3s c%-4s %12s req/s  p50 %7s ms  p99 %7s ms  cpu %s us/req  %s\n' \
        "$name" "$pipeline" "$clients" "$rps" "$p50" "$p99" "$cpu" "$verdict"
}
for P in 1 16; do
    for C in 1 50 500; do
        run "redis SADD" "$RS_PID" "$RS" "$P" "$C" SADD bset __rand_int__
        run "bloomgate BF.ADD" "$BG_PID" "$BG" "$P" "$C" BF.ADD bench __rand_int__
        run "bloomgate CF.ADD" "$BG_PID" "$BG" "$P" "$C" CF.ADD cbench __rand_int__
        run "redis SISMEMBER" "$RS_PID" "$RS" "$P" "$C" SISMEMBER bset __rand_int__
        run "bloomgate BF.EXISTS" "$BG_PID" "$BG" "$P" "$C" BF.EXISTS bench __rand_int__
        run "bloomgate CF.EXISTS" "$BG_PID" "$BG" "$P" "$C" CF.EXISTS cbench __rand_int__
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
