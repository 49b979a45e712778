#!/usr/bin/env python3
"""The number of tests a CI run skipped, which must be 0 (`.ci/run` ends with it).

Usage: skipped.py OUTPUT_LOG [SKIP_LOG]

Counts, across everything the run printed to OUTPUT_LOG and recorded in SKIP_LOG (default
$BLOOMGATE_SKIP_LOG):
  - libtest's ignored tests (the `N ignored` of every `test result:` line, doc-tests included);
  - the skips recorded in SKIP_LOG, one a line: Rust tests through
    `bloomgate_testkit::skip_or_fail`, scripts through scripts/lib/bgtest.py's `skip_or_fail` (or
    `bgtest.py skip` from shell), pytest through crates/bloomgate-py/tests/conftest.py.
Under BLOOMGATE_NO_SKIP=1 those helpers fail instead of skipping, so a green run has none; the
count is the proof, and catches an `#[ignore]` too. Prints each skip, then
`skipped tests: N`; exits 1 when N > 0 or OUTPUT_LOG is missing.
"""
import os
import re
import sys

RESULT = re.compile(r"^test result: \w+\. \d+ passed; \d+ failed; (\d+) ignored;")
IGNORED = re.compile(r"^test (.+) \.\.\. ignored")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    output = sys.argv[1]
    skip_log = sys.argv[2] if len(sys.argv) == 3 else os.environ.get("BLOOMGATE_SKIP_LOG")
    try:
        with open(output, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        print("skipped tests: unknown (%s)" % e)
        return 1
    ignored = sum(int(m.group(1)) for m in map(RESULT.match, lines) if m)
    for line in lines:
        m = IGNORED.match(line)
        if m:
            print("ignored by libtest: %s" % m.group(1))
    recorded = []
    if skip_log and os.path.exists(skip_log):
        with open(skip_log, errors="replace") as f:
            recorded = [line for line in f.read().splitlines() if line.strip()]
    for line in recorded:
        print("recorded skip: %s" % line)
    total = ignored + len(recorded)
    print("skipped tests: %d (libtest ignored %d, recorded skips %d)" % (total, ignored, len(recorded)))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
