#!/usr/bin/env bash
# The Python benchmark (BENCHMARKS.md's Python rows): builds the bloomgate wheel, installs it with rbloom,
# pybloom-live, pybloomfiltermmap3 and fastbloom-rs from PyPI into its own virtualenv
# (target/py-bench-venv), and runs `python -m bloomgate.bench`. Arguments go to the benchmark
# (default: --items 1000000 --items 10000000 --markdown).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/py-bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check 'maturin>=1.7,<2' \
  rbloom pybloom-live pybloomfiltermmap3 fastbloom-rs numpy
rm -rf target/py-bench-wheels
"$venv/bin/maturin" build --release --locked -m crates/bloomgate-py/Cargo.toml -o target/py-bench-wheels
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps target/py-bench-wheels/bloomgate-*.whl
"$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | grep -iE '^(bloomgate|rbloom|pybloom|fastbloom)'
if [ $# -eq 0 ]; then set -- --items 1000000 --items 10000000 --markdown; fi
cd target   # so `bloomgate` is the installed wheel, not a source tree
exec "$PWD/../$venv/bin/python" -m bloomgate.bench "$@"
