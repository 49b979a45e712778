#!/usr/bin/env bash
# The Python wheel as a user installs it: the abi3 manylinux wheel (built by maturin --release;
# reused from scripts/ci/python_tests.sh when it is there) installed with its `numpy` extra into a
# fresh virtualenv, with no Rust toolchain on PATH, then the package's pytest suite run from
# outside the source tree (so `import bloomgate` is the installed wheel).
# $1: the bloomgate CLI for the file round trips (default: target/release, else target/debug).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
bin=${1:-}
[ -n "$bin" ] || for b in target/release/bloomgate target/debug/bloomgate; do [ -x "$b" ] && { bin=$repo/$b; break; }; done
wheel=$(ls -t target/py-wheels/bloomgate-*-abi3-manylinux*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  venv=target/py-venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check 'maturin>=1.7,<2'
  "$venv/bin/maturin" build --release --locked -m crates/bloomgate-py/Cargo.toml -o target/py-wheels
  wheel=$(ls -t target/py-wheels/bloomgate-*-abi3-manylinux*.whl | head -n 1)
fi
echo "wheel: $wheel"
python=$(python3 -c 'import sys; print(sys.executable)')
scratch=$(mktemp -d "${TMPDIR:-/tmp}/bloomgate-wheel.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
"$python" -m venv "$scratch/venv"
# No Rust toolchain from here on: only the virtualenv and the system's own directories.
clean=(env -u CARGO_HOME -u RUSTUP_HOME -u RUSTC -u CARGO -u PYTHONPATH
       PATH="$scratch/venv/bin:/usr/local/bin:/usr/bin:/bin" VIRTUAL_ENV="$scratch/venv")
if "${clean[@]}" bash -c 'command -v cargo || command -v rustc' >/dev/null; then
  echo "wheel_check: a Rust toolchain is still on PATH" >&2
  exit 1
fi
"${clean[@]}" python -m pip install -q --disable-pip-version-check --only-binary=:all: \
  "$repo/$wheel[numpy]" pytest hypothesis
cd "$scratch"
"${clean[@]}" python -c 'import bloomgate, sys; assert sys.prefix in bloomgate.__file__, bloomgate.__file__; print("installed:", bloomgate.__file__)'
"${clean[@]}" BLOOMGATE_BIN="$bin" \
  python -m pytest -q -p no:cacheprovider "$repo/crates/bloomgate-py/tests"
