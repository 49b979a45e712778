#!/usr/bin/env bash
# Runs every example in README.md and docs/ (or in the Markdown files given), so the docs cannot rot.
#
#   bash scripts/ci/docs_check.sh                 # README.md and every docs/**/*.md
#   bash scripts/ci/docs_check.sh docs/server.md  # one file
#
# RULES FOR WRITERS (short enough to keep in your head):
#  1. Blocks fenced ```sh, ```bash or ```python RUN, in order, one shell per file (variables and
#     files carry from one block to the next; Python blocks run with the same python3).
#     Everything else does not run: fence installs, builds, long runs, output and config excerpts
#     as ```text. Never leave a fence bare (```): rustdoc would compile it as Rust. ```rust blocks
#     of README.md and docs/library.md are compiled and run as doctests by `cargo test`.
#  2. A block fails the check if any command in it fails (bash -e -o pipefail; a Python exception).
#     redis-cli exits 0 on an error reply, so an error reply is a failure too.
#  3. Ports: in a runnable block, a port is written as a number in 6379-6399, 7000-7099 or
#     9100-9199, and such numbers are never used for anything else. Each one is replaced by a free
#     loopback port (the same one throughout the file; port+10000 is free too, for Cluster buses).
#     Pass ports explicitly (`redis-cli -p 6379`, `redis.Redis(port=6379)`): defaults are not
#     substituted.
#  4. A command started in the background (a line ending in `&`, or with `--daemonize yes`) is
#     waited for: the ports on that line (or, if none, those written earlier in the block) must
#     accept connections (and a Redis-protocol server be done loading) within 30 s.
#     Everything a file started is stopped when its blocks are done (its process group is killed
#     and every substituted port gets `redis-cli SHUTDOWN NOSAVE`), so blocks need no clean-up.
#  5. Blocks run in a fresh scratch directory per file, as if in the root of a clone: `target/`
#     (with target/release/bloomgate and target/release/libbloomgate_module.so pointing at the
#     builds found), `tests/`, `crates/` and `scripts/` point at the repository's; `bloomgate` and
#     `python3` (with the bloomgate wheel and redis-py) come first on PATH. Nothing is written to
#     the repository.
#  6. Keep blocks quick (seconds): a file gets DOCS_TIMEOUT seconds (default 300) in all.
#
# Environment: BLOOMGATE_BIN (default target/release/bloomgate, else target/debug/bloomgate),
# BLOOMGATE_MODULE (likewise libbloomgate_module.so), DOCS_PYTHON (default target/py-venv/bin/python
# if it imports bloomgate and redis, else python3), DOCS_TIMEOUT, DOCS_KEEP=1 keeps scratch dirs.
# Ends with `docs: N passed, M failed`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"

pick() { for f in "$@"; do [ -e "$f" ] && { echo "$repo/$f"; return; }; done; echo ""; }
bin=${BLOOMGATE_BIN:-$(pick target/release/bloomgate target/debug/bloomgate)}
module=${BLOOMGATE_MODULE:-$(pick target/release/libbloomgate_module.so target/debug/libbloomgate_module.so)}
[ -n "$bin" ] || { echo "docs_check: no bloomgate binary (cargo build -p bloomgate-cli)" >&2; exit 1; }
py=${DOCS_PYTHON:-}
if [ -z "$py" ]; then
  for cand in "$repo/target/py-venv/bin/python" "$(command -v python3)"; do
    if [ -x "$cand" ] && "$cand" -c 'import bloomgate, redis' 2>/dev/null; then py=$cand; break; fi
  done
fi
[ -n "$py" ] || { echo "docs_check: no python3 that imports bloomgate and redis (bash scripts/ci/python_tests.sh makes target/py-venv)" >&2; exit 1; }

if [ $# -gt 0 ]; then files=("$@"); else
  mapfile -t files < <(printf '%s\n' README.md; find docs -name '*.md' | sort)
fi

passed=0; failed=0; failures=()
for file in "${files[@]}"; do
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/bloomgate-docs.XXXXXX")
  # The file's runnable blocks as one bash script (or nothing to run).
  if ! python3 "$repo/scripts/ci/docs_extract.py" "$file" "$scratch/run.sh" "$scratch/ports"; then
    failures+=("$file: could not be parsed"); failed=$((failed + 1)); continue
  fi
  if [ ! -s "$scratch/run.sh" ]; then rm -rf "$scratch"; continue; fi
  mkdir -p "$scratch/bin" "$scratch/target/release"
  ln -s "$bin" "$scratch/bin/bloomgate"
  # A wrapper, not a symlink: a virtualenv's python only finds its packages when run by its path.
  for name in python3 python; do
    printf '#!/bin/sh\nexec %q "$@"\n' "$py" > "$scratch/bin/$name"; chmod +x "$scratch/bin/$name"
  done
  ln -s "$bin" "$scratch/target/release/bloomgate"
  [ -n "$module" ] && ln -s "$module" "$scratch/target/release/libbloomgate_module.so"
  for d in tests crates scripts; do ln -s "$repo/$d" "$scratch/$d"; done
  echo "== $file ($(grep -c '^# block ' "$scratch/run.sh") blocks)"
  status=0
  (cd "$scratch" && PATH="$scratch/bin:$PATH" timeout -k 5 "${DOCS_TIMEOUT:-300}" \
      setsid bash "$scratch/run.sh") >"$scratch/out.log" 2>&1 || status=$?
  # Stop whatever the file started: daemonized servers by port, the rest by process group.
  while read -r port; do
    timeout 2 redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  done < "$scratch/ports"
  sid=$(cat "$scratch/sid" 2>/dev/null || true)
  if [ -n "$sid" ] && [ "$sid" -gt 1 ]; then pkill -KILL -s "$sid" 2>/dev/null || true; fi
  if [ "$status" -eq 0 ]; then
    passed=$((passed + 1))
    [ -n "${DOCS_KEEP:-}" ] || rm -rf "$scratch"
  else
    failed=$((failed + 1))
    failures+=("$file (exit $status; log and scratch dir: $scratch)")
    tail -n 25 "$scratch/out.log" | sed 's/^/    /'
  fi
done
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "docs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
