#!/usr/bin/env python3
"""Turns the runnable blocks of one Markdown file into one bash script (scripts/ci/docs_check.sh).

usage: docs_extract.py FILE.md OUT.sh PORTS_OUT

Blocks fenced ```sh / ```bash run as they are and ```python blocks through `python3 -` (rules at
the top of docs_check.sh). Port numbers in 6379-6399, 7000-7099 and 9100-9199 are replaced by
free loopback ports (one per distinct number, for the whole file), written one per line to
PORTS_OUT. An empty OUT.sh means the file has nothing to run.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from bgtest import free_port  # noqa: E402  (scripts/lib, found from this file)

RUN = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "py", "python3": "py"}
PORT = re.compile(r"(?<![\d.])(63(?:79|8\d|9\d)|70\d\d|91\d\d)(?![\d])")
FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")


def blocks(text):
    """(line number, language, body) for every fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i + 1
        body = []
        i += 1
        while i < len(lines) and not (
            lines[i].strip().startswith(fence[0] * len(fence)) and lines[i].strip().strip(fence[0]) == ""
        ):
            body.append(lines[i])
            i += 1
        i += 1
        yield start, lang, "\n".join(body)


def logical_lines(body):
    """Joins backslash continuations: (first physical line index, last index, joined text)."""
    lines = body.split("\n")
    out, i = [], 0
    while i < len(lines):
        j, joined = i, lines[i]
        while joined.endswith("\\") and j + 1 < len(lines):
            j += 1
            joined = joined[:-1] + " " + lines[j]
        out.append((i, j, joined))
        i = j + 1
    return lines, out


PRELUDE = r"""set -euo pipefail
echo $$ > sid
__docs_block=start
trap 'echo "docs_check: FAILED in $__docs_block (exit $?)" >&2' ERR
__docs_wait() {  # ports...: wait until each accepts connections
  local p i
  for p in "$@"; do
    for i in $(seq 1 300); do
      # Accepting, and (for a Redis-protocol port) done loading its data.
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null \
         && ! timeout 2 redis-cli -p "$p" PING 2>/dev/null | grep -q '^LOADING'; then break; fi
      if [ "$i" = 300 ]; then echo "docs_check: nothing listens on port $p after 30 s" >&2; return 1; fi
      sleep 0.1
    done
  done
}
redis-cli() {  # an error reply fails the block (redis-cli itself exits 0 on one)
  local out rc=0
  out=$(command redis-cli "$@") || rc=$?
  [ -z "$out" ] || printf '%s\n' "$out"
  [ "$rc" -eq 0 ] || return "$rc"
  if printf '%s\n' "$out" | grep -qE '^(\(error\) )?(ERR|WRONGTYPE|NOPERM|NOAUTH|MISCONF|OOM|BUSY|NOSCRIPT|EXECABORT|LOADING) '; then
    echo "docs_check: redis-cli got an error reply" >&2
    return 1
  fi
}
export -f redis-cli
"""


def main():
    path, out_path, ports_path = sys.argv[1:4]
    text = open(path, encoding="utf-8").read()
    runnable = [(n, RUN[lang], body) for n, lang, body in blocks(text) if lang in RUN]
    mapping = {}
    for _, _, body in runnable:
        for m in PORT.finditer(body):
            if m.group(1) not in mapping:
                # With port + 10000 free too, for a Redis Cluster's bus.
                taken = set(map(int, mapping.values()))
                mapping[m.group(1)] = str(free_port(also=(10000,), avoid=taken))
    sub = lambda s: PORT.sub(lambda m: mapping[m.group(1)], s)  # noqa: E731
    script = []
    for n, kind, body in runnable:
        where = f"{path}:{n}"
        script.append(f"# block {where}")
        script.append(f"__docs_block={where!r}")
        script.append(f"echo '>>> {where}'")
        if kind == "py":
            tag = "__BLOOMGATE_DOCS_PY__"
            script += [f"python3 - <<'{tag}'", sub(body), tag]
            continue
        lines, logical = logical_lines(body)
        seen_ports, pending, depth = [], [], 0
        for first, last, joined in logical:
            script += [sub(line) for line in lines[first : last + 1]]
            ports = [mapping[m.group(1)] for m in PORT.finditer(joined)]
            code = joined.split(" #")[0].strip()
            if re.match(r"(for|while|until)\b", code):
                depth += 1
            if (code.endswith("&") and not code.endswith("&&")) or "--daemonize yes" in code:
                pending += ports or seen_ports
            if re.search(r"(^|;\s*)done\b", code):
                depth = max(0, depth - 1)
            # Inside a loop, wait once the loop is over (it starts the servers one by one).
            if pending and depth == 0:
                script.append("__docs_wait " + " ".join(dict.fromkeys(pending)))
                pending = []
            seen_ports += ports
    with open(out_path, "w", encoding="utf-8") as f:
        if runnable:
            f.write(PRELUDE + "\n".join(script) + "\n")
    with open(ports_path, "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in mapping.values()))


if __name__ == "__main__":
    main()
