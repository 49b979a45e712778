#!/usr/bin/env bash
# Installs a bloomgate .deb with dpkg and uses it as an operator would (root; run by
# scripts/ci/package_check.sh): the binary, the user, the data directory, the conffile and the
# hardened unit are where they belong; the unit's ExecStart, run as the package's user from its
# WorkingDirectory, serves redis-cli and Prometheus, keeps its data across a restart and stops
# cleanly; an upgrade keeps a changed conffile; remove and purge clean up. Ports come from the
# environment (BLOOMGATE_PORT, BLOOMGATE_METRICS_ADDR override the config file), so the
# package's config is run as shipped otherwise.
#
#   bash scripts/ci/deb_check.sh target/debian/bloomgate_0.1.0-1_amd64.deb
set -euo pipefail
deb=$(realpath "$1")
fail() { echo "deb_check: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i)"
if dpkg-query -W -f='${Status}' bloomgate 2>/dev/null | grep -q 'install ok installed'; then
  fail "a bloomgate package is already installed here: not replacing it (dpkg -P bloomgate first)"
fi
# Free ports, and waiting until the service answers PING (scripts/lib).
bgtest=$(dirname "$(realpath "$0")")/../lib/bgtest.py
{ read -r port; read -r mport; } < <(python3 "$bgtest" free-port 2)
server=""
cleanup() {
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null || true
  dpkg -P bloomgate >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "-- dpkg -i $(basename "$deb")"
dpkg -i "$deb" >/dev/null
version=$(dpkg-deb -f "$deb" Version)
/usr/bin/bloomgate --version | grep -q "^bloomgate ${version%-*}$" || fail "bloomgate --version: $(/usr/bin/bloomgate --version)"
getent passwd bloomgate | grep -q ':/var/lib/bloomgate:/usr/sbin/nologin$' || fail "user: $(getent passwd bloomgate)"
[ "$(stat -c '%U:%G %a' /var/lib/bloomgate)" = "bloomgate:bloomgate 750" ] || fail "data dir: $(stat -c '%U:%G %a' /var/lib/bloomgate)"
[ "$(stat -c '%U:%G %a' /etc/bloomgate/bloomgate.conf)" = "root:bloomgate 640" ] || fail "config: $(stat -c '%U:%G %a' /etc/bloomgate/bloomgate.conf)"
dpkg-query -W -f='${Conffiles}\n' bloomgate | grep -q '/etc/bloomgate/bloomgate.conf' || fail "the config is not a conffile"
unit=$(dpkg -L bloomgate | grep '/systemd/system/bloomgate.service$') || fail "no unit installed"
for line in 'User=bloomgate' 'StateDirectory=bloomgate' 'ProtectSystem=strict' 'NoNewPrivileges=yes' \
            'WorkingDirectory=/var/lib/bloomgate' 'ExecStart=/usr/bin/bloomgate serve --config /etc/bloomgate/bloomgate.conf'; do
  grep -qx "$line" "$unit" || fail "$unit lacks $line"
done
if command -v systemd-analyze >/dev/null 2>&1; then
  # Unit syntax and the binaries it names; the container has no running systemd.
  out=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || echo "$out"
else
  python3 "$bgtest" skip "systemd-analyze verify of the unit" \
    "systemd-analyze is not installed (bash .ci/setup installs systemd)"
fi
echo "   installed $version: /usr/bin/bloomgate, user bloomgate, $unit, conffile, /var/lib/bloomgate"

workdir=$(sed -n 's/^WorkingDirectory=//p' "$unit")
read -r -a exec_start <<<"$(sed -n 's/^ExecStart=//p' "$unit")"
start_service() {  # the unit's command, as its user, from its directory
  (cd "$workdir" && exec setpriv --reuid=bloomgate --regid=bloomgate --init-groups -- \
      env BLOOMGATE_PORT="$port" \
      BLOOMGATE_METRICS_ADDR="127.0.0.1:$mport" "${exec_start[@]}") 2>"$log" &
  server=$!
  python3 "$bgtest" wait "$port" --pid "$server" --seconds 30 || { cat "$log"; fail "the service did not start"; }
}
log=$(mktemp)
echo "-- ${exec_start[*]} (as bloomgate, port $port)"
start_service
grep -q "bloomgate ${version%-*} serving on 127.0.0.1:$port" "$log" || { cat "$log"; fail "no start banner"; }
grep -q 'data dir /var/lib/bloomgate, appendfsync everysec' "$log" || { cat "$log"; fail "banner: $(head -n 1 "$log")"; }
[ "$(redis-cli -p "$port" BF.ADD seen alice)" = 1 ] || fail "BF.ADD"
[ "$(redis-cli -p "$port" BF.EXISTS seen alice)" = 1 ] || fail "BF.EXISTS"
[ "$(redis-cli -p "$port" CF.ADD carts item-7)" = 1 ] || fail "CF.ADD"
[ "$(redis-cli -p "$port" SAVE)" = OK ] || fail "SAVE"
# Scraped until it shows both keys (up to 5 s); on failure, say what the scrape returned.
scraped="" status=0
for _ in $(seq 1 50); do
  scraped=$(curl -sS --max-time 2 "http://127.0.0.1:$mport/metrics" 2>&1) && status=0 || status=$?
  grep -qx 'bloomgate_keys 2' <<<"$scraped" && break
  sleep 0.1
done
grep -qx 'bloomgate_keys 2' <<<"$scraped" || {
  echo "curl exit $status; keys line: $(grep '^bloomgate_keys' <<<"$scraped" || echo none)"
  echo "scrape began: $(head -c 300 <<<"$scraped")"
  echo "DBSIZE: $(redis-cli -p "$port" DBSIZE); KEYS: $(redis-cli -p "$port" KEYS '*' | tr '\n' ' ')"
  cat "$log"
  fail "metrics: no bloomgate_keys 2"
}
bad=$(find /var/lib/bloomgate -mindepth 1 \( ! -user bloomgate -o -type f -perm /077 \) -print)
[ -z "$bad" ] || fail "data files not private to bloomgate: $bad"
redis-cli -p "$port" SHUTDOWN >/dev/null 2>&1 || true
wait "$server" || fail "exit status $? after SHUTDOWN"
server=""
start_service
[ "$(redis-cli -p "$port" BF.EXISTS seen alice)" = 1 ] || fail "the data did not survive a restart"
kill -TERM "$server"
wait "$server" || fail "exit status $? after SIGTERM"
server=""
echo "   served redis-cli and /metrics, kept its data across a restart, stopped with exit 0"

echo "-- upgrade keeps a changed conffile; remove keeps config and data; purge removes them"
echo "# changed by the operator" >> /etc/bloomgate/bloomgate.conf
dpkg -i --force-confold "$deb" >/dev/null
grep -q '^# changed by the operator$' /etc/bloomgate/bloomgate.conf || fail "upgrade replaced the changed conffile"
dpkg -r bloomgate >/dev/null
[ ! -e /usr/bin/bloomgate ] || fail "remove left /usr/bin/bloomgate"
[ -e /etc/bloomgate/bloomgate.conf ] || fail "remove deleted the conffile"
[ -d /var/lib/bloomgate ] || fail "remove deleted the data"
dpkg -P bloomgate >/dev/null
[ ! -e /etc/bloomgate ] || fail "purge left /etc/bloomgate"
[ ! -e /var/lib/bloomgate ] || fail "purge left /var/lib/bloomgate"
rm -f "$log"
echo "   removed and purged"
