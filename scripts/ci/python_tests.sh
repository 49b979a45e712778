#!/usr/bin/env bash
# The Python package's tests: builds the abi3 wheel of crates/bloomgate-py with maturin, installs
# it into a virtualenv (target/py-venv), and runs its pytest suite, including the file round
# trips with the `bloomgate` CLI binary given as $1 (default target/debug/bloomgate).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/debug/bloomgate}
venv=target/py-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check 'maturin>=1.7,<2' pytest hypothesis numpy 'redis>=5'
rm -rf target/py-wheels
"$venv/bin/maturin" build --release --locked -m crates/bloomgate-py/Cargo.toml -o target/py-wheels
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps target/py-wheels/bloomgate-*.whl
BLOOMGATE_BIN="$bin" "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/bloomgate-py/tests
