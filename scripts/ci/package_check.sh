#!/usr/bin/env bash
# What a user installs, checked as a user gets it (run by scripts/ci/test.sh after the test suite):
#   1. cargo deny --offline check: advisories (the RustSec database .ci/setup places from CI's
#      bundle; where absent, a skip through `bgtest.py skip`, a failure under CI), licences,
#      duplicate versions, sources;
#   2. cargo package --workspace --locked, with verification (each publishable crate builds from
#      its packaged sources);
#   3. the Debian package (cargo deb, one release build shared with the docs check): installed
#      with dpkg -i, the unit's ExecStart run as the package's user against its own config and
#      data directory, spoken to with redis-cli, restarted on its data, then removed and purged
#      (root and dpkg only; elsewhere a skip through `bgtest.py skip`, a failure under CI);
#   4. the abi3 wheel (maturin build --release) installed into a fresh virtualenv with no Rust
#      toolchain on PATH, running the Python package's tests there.
# Each part prints one `package: <part> ok` line; the script ends with `package: N passed, 0 failed`.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
passed=0
ok() { echo "package: $1 ok"; passed=$((passed + 1)); }

echo "== cargo deny --offline check"
cargo fetch --locked --quiet   # cargo deny reads the metadata of every platform's crates
db=${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/advisory-db-3157b0e258782691
if [ -d "$db/.git" ]; then
  cargo deny --offline --log-level error check
else
  python3 scripts/lib/bgtest.py skip "cargo deny's advisories check" \
    "no RustSec database at $db (.ci/setup places it from CI's bundle)"
  cargo deny --offline --log-level error check bans licenses sources
fi
ok "cargo deny"

echo "== cargo package --workspace --locked (with verification)"
# Verification builds every publishable crate from its .crate in target/package (the dev
# profile). A packaged manifest has no workspace profiles: restating the workspace's
# `profile.dev.package."*"` lets it reuse the registry dependencies `cargo build` already built.
# Cargo extracts the packaged crates through a temporary local registry whose sources it caches
# in $CARGO_HOME/registry/src/-<hash>/ by name and version, and reuses them on the next run from
# the same checkout path: an earlier run's bloomgate-0.1.0 would be verified in place of this
# one (it failed CI once). Drop those cached copies of our own crates first.
for stale in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/bloomgate*-[0-9]*; do
  if [ -d "$stale" ]; then rm -rf "$stale"; fi
done
cargo package --workspace --locked --quiet --config 'profile.dev.package."*".opt-level=3' \
  --exclude bloomgate-bench --exclude bloomgate-py --exclude bloomgate-testkit
ok "cargo package"

echo "== Debian package"
cargo deb -p bloomgate-cli --locked --quiet >/dev/null
deb=$(ls -t target/debian/bloomgate_*.deb | head -n 1)
dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'
dpkg-deb --contents "$deb" | awk '{print $6}'
if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null 2>&1; then
  python3 scripts/lib/bgtest.py skip "installing the .deb (scripts/ci/deb_check.sh)" \
    "not root (or no dpkg): the .deb was built but not installed"
else
  bash scripts/ci/deb_check.sh "$deb"
fi
ok "debian package"

echo "== abi3 wheel in a fresh virtualenv without a Rust toolchain"
bash scripts/ci/wheel_check.sh
ok "wheel"

echo "package: $passed passed, 0 failed"
