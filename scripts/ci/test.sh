#!/usr/bin/env bash
# The test suite: every crate's unit, property, statistical and integration tests, then the
# module's tests again inside Valkey and Redis 8.2, the real-client smoke tests (redis-cli, redis-py, node-redis) against
# a real `bloomgate serve`, the gate's client tests (scripts/ci/gate_feed.py, gate_clients.py), the Redis
# Cluster test (six redis-server nodes with the module, scripts/ci/cluster_test.py), the gate tier
# (three serve gates sharing filters in a Redis 8.2 cluster, scripts/ci/gate_tier.py), the Python
# package's pytest suite (scripts/ci/python_tests.sh), what users install (scripts/ci/package_check.sh:
# cargo deny, cargo package, the .deb with dpkg, the wheel in a fresh virtualenv) and every
# example in README.md and docs/ (scripts/ci/docs_check.sh).
#
# A part that cannot run here (valkey-server missing, Redis 8.2 not fetchable) goes through
# `bgtest.py skip`: a failure under BLOOMGATE_NO_SKIP=1 (.ci/run), a recorded skip elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
skip() { python3 scripts/lib/bgtest.py skip "$1" "$2"; }
# Redis 8.2 (fetched once by scripts/ci/get_redis8.sh) first: the tests that need Redis 8 itself
# (active defrag, RedisBloom 8's RDB, serve's double replies against Redis 8.2's text) find it
# through BLOOMGATE_REDIS8_SERVER in every pass below.
if R8=$(bash scripts/ci/get_redis8.sh); then
  export BLOOMGATE_REDIS8_SERVER="$R8"
else
  R8=""
  skip "the tests inside Redis 8.2" "scripts/ci/get_redis8.sh could not fetch Redis 8.2"
fi
cargo build --locked -p bloomgate-module   # the .so the module tests load into redis-server
cargo test --workspace --locked
cargo build --locked -p bloomgate-cli   # the binary the integration tests used
if command -v valkey-server >/dev/null 2>&1; then
  echo "== the module inside Valkey ($(valkey-server --version | cut -d' ' -f3))"
  BLOOMGATE_REDIS_SERVER=valkey-server cargo test --locked -p bloomgate-module
else
  skip "the module inside Valkey" "valkey-server is not installed (bash .ci/setup installs it)"
fi
# The module inside Redis 8.2: RedisBloom 8's unprefixed configs, the t-digest and every other
# module test but the RedisBloom 2.4 RDB fixture, whose MEMORY USAGE and DUMP footer are Redis
# 7.0's.
if [ -n "$R8" ]; then
  echo "== the module inside Redis 8.2"
  BLOOMGATE_REDIS_SERVER="$R8" cargo test --locked -p bloomgate-module --test module_redis
fi
echo "== redis-cli smoke test"
bash scripts/ci/redis_cli_smoke.sh target/debug/bloomgate
echo "== redis-py smoke test"
python3 scripts/ci/redis_py_smoke.py --bin target/debug/bloomgate
echo "== redis-py pub/sub test"
python3 scripts/ci/redis_py_pubsub.py --bin target/debug/bloomgate
echo "== node-redis pub/sub test"
python3 scripts/ci/node_pubsub.py --bin target/debug/bloomgate
echo "smoke: 4 passed, 0 failed"
echo "== the gate over RESP: redis-py feed simulations (SQLite; PostgreSQL stopped half-way), Go (redigo), node-redis"
python3 scripts/ci/gate_feed.py --bin target/debug/bloomgate --store sqlite
python3 scripts/ci/gate_feed.py --bin target/debug/bloomgate --store postgres --outage
python3 scripts/ci/gate_clients.py --bin target/debug/bloomgate
echo "== Redis Cluster test (3 masters + 3 replicas of redis-server with the module, loopback)"
python3 scripts/ci/cluster_test.py --module target/debug/libbloomgate_module.so --bloomgate target/debug/bloomgate
echo "== the gate tier: 3 serve gates over PostgreSQL and a Redis 8.2 cluster with the module, a Go client, a gate killed, a master failed over"
# The script itself fails without Go with redigo or PostgreSQL.
if [ -n "$R8" ]; then
  python3 scripts/ci/gate_tier.py --bin target/debug/bloomgate --module target/debug/libbloomgate_module.so --redis-server "$R8"
else
  skip "the gate tier" "it needs Redis 8.2, which scripts/ci/get_redis8.sh could not fetch"
fi
echo "== Python package (maturin wheel + pytest)"
bash scripts/ci/python_tests.sh target/debug/bloomgate
echo "== packaging (cargo deny, cargo package, the .deb installed with dpkg, the wheel without Rust)"
bash scripts/ci/package_check.sh
echo "== every shell and Python example in README.md and docs/"
bash scripts/ci/docs_check.sh
