#!/usr/bin/env python3
"""Checks the workspace's layout rules: no circle of `use` between the files of a crate,
no source file (outside the testkit crate) longer than 800 lines before its #[cfg(test)] module,
the CLI crate's src/ at most 1,500 lines, no comment that points at an issue number or at a
reference folder a clone does not have, and no code or doc that cites a document the repository
does not hold (a `.md` name no tracked file has, or the reference notes outside it). Exits 1 on a
violation.

Usage: python3 scripts/ci/layout_check.py [REPO]"""
import os, re, sys, subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..')) if len(sys.argv) < 2 else sys.argv[1]

def files(crate_src):
    out = {}
    for d, _, fs in os.walk(crate_src):
        for f in fs:
            if f.endswith('.rs'):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, crate_src)[:-3]
                parts = rel.split(os.sep)
                if parts[-1] in ('mod', 'lib', 'main'):
                    parts = parts[:-1]
                out[tuple(parts)] = p
    return out

def strip_tests(text):
    m = re.search(r'^#\[cfg\(test\)\]', text, re.M)
    return text[:m.start()] if m else text

PATH_RE = re.compile(r'\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)')

def refs(modpath, text, mods):
    """Module paths (keys of mods) that this file's non-test code refers to."""
    text = strip_tests(text)
    text = re.sub(r'//[^\n]*', '', text)
    found = set()
    # expand `use crate::{a, b::c}` groups shallowly
    for m in re.finditer(r'\b(crate|super)::((?:[A-Za-z_][A-Za-z0-9_]*::)*)\{([^;]*?)\}', text, re.S):
        base, prefix, inner = m.group(1), m.group(2), m.group(3)
        for item in re.split(r',', inner):
            item = item.strip().split(' as ')[0].strip()
            if not item:
                continue
            found.add(resolve(modpath, base, (prefix + item).split('::'), mods))
    for m in PATH_RE.finditer(text):
        if m.group(2) == '::{':
            continue
        found.add(resolve(modpath, m.group(1), m.group(2).strip(':').split('::'), mods))
    found.discard(None)
    found.discard(modpath)
    return found

def resolve(modpath, base, segs, mods):
    segs = [s for s in segs if s and s != '{']
    if base == 'crate':
        cur = ()
    elif base == 'super':
        # modpath's parent; a file's own module is modpath
        cur = modpath[:-1]
        while segs and segs[0] == 'super':
            cur = cur[:-1]; segs = segs[1:]
    else:
        cur = modpath
    best = None
    path = cur
    if path in mods:
        best = path
    for s in segs:
        path = path + (s,)
        if path in mods:
            best = path
        else:
            break
    if best == () :
        return None  # the crate root: lib.rs re-exports don't make a circle by themselves
    # a reference to an ancestor module (mod.rs) of ourselves is structural, not a circle
    if best is not None and modpath[:len(best)] == best:
        return None
    return best

def sccs(graph):
    index = {}; low = {}; stack = []; on = set(); out = []; i = [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in list(graph):
        if v not in index: visit(v)
    return out

# Placeholders that stand for any file in a usage line, not for a document.
PLACEHOLDER_DOCS = {'FILE.md'}
DOC_NAME = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]*\.md\b')
OUTSIDE_NOTES = re.compile(r'\banchors(\.md)?\b|\b[Pp]itfall #?[0-9]+')


def check_document_references():
    """Lines of code, scripts and docs that cite a document not in the repository: a `.md` file
    name no tracked file has, or the reference notes outside it ("anchors", "pitfall N")."""
    tracked = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True).stdout.split()
    names = {os.path.basename(t) for t in tracked}
    cited = [t for t in tracked
             if t.endswith(('.rs', '.py', '.sh', '.pyi', '.c', '.md', '.toml')) or t.startswith('.ci/')]
    found = 0
    for rel in cited:
        if rel.endswith('layout_check.py'):
            continue
        for no, line in enumerate(open(os.path.join(ROOT, rel), errors='replace'), 1):
            missing = [m.group(0) for m in DOC_NAME.finditer(line)
                       if os.path.basename(m.group(0)) not in names | PLACEHOLDER_DOCS]
            if missing or OUTSIDE_NOTES.search(line):
                found += 1
                what = missing[0] if missing else OUTSIDE_NOTES.search(line).group(0)
                print(f'{rel}:{no}: cites a document not in the repository ({what}): {line.strip()[:100]}')
    return found


def main():
    bad = 0
    crates_dir = os.path.join(ROOT, 'crates')
    tracked = subprocess.run(['git', 'ls-files', '*.rs'], cwd=ROOT, capture_output=True, text=True).stdout.split()
    for crate in sorted(os.listdir(crates_dir)):
        for srcdir in ('src',):
            src = os.path.join(crates_dir, crate, srcdir)
            if not os.path.isdir(src): continue
            mods = files(src)
            graph = {m: refs(m, open(p).read(), mods) for m, p in mods.items()}
            for comp in sccs(graph):
                bad += 1
                names = sorted(os.path.relpath(mods[m], ROOT) for m in comp)
                print(f'circle of use in {crate}: ' + ' <-> '.join(names))
    for rel in tracked:
        if not rel.startswith(('crates/', 'fuzz/')) or rel.startswith('crates/bloomgate-testkit/'):
            continue
        text = open(os.path.join(ROOT, rel)).read()
        n = strip_tests(text).count('\n')
        if n > 800:
            bad += 1
            print(f'{rel}: {n} lines before its #[cfg(test)] module (at most 800)')
    # Comments say why in the code's terms: no pointer at an issue number or at a folder outside
    # the repository (a clone has neither).
    pointer = re.compile(r'\b[Ii]ssues? ?#?[0-9]+|\(#[0-9]+\)|shared/reference')
    for rel in subprocess.run(['git', 'ls-files', '*.rs', '*.py', '*.sh', '*.pyi', '*.c', '.ci/*'], cwd=ROOT,
                              capture_output=True, text=True).stdout.split():
        if rel.endswith('layout_check.py'):
            continue
        for no, line in enumerate(open(os.path.join(ROOT, rel), errors='replace'), 1):
            if pointer.search(line):
                bad += 1
                print(f'{rel}:{no}: points at an issue or a folder outside the repository: {line.strip()[:100]}')
    # Nor do code or docs cite a document a clone does not have: a `NAME.md` that is no file of
    # the repository, the reference notes by name ("anchors") or by their numbered pitfalls.
    bad += check_document_references()
    cli = sum(open(os.path.join(ROOT, r)).read().count('\n') for r in tracked if r.startswith('crates/bloomgate-cli/src/'))
    if cli > 1500:
        bad += 1
        print(f'crates/bloomgate-cli/src: {cli} lines (at most 1,500)')
    print(f'layout: {"ok" if not bad else str(bad) + " problem(s)"}')
    sys.exit(1 if bad else 0)

main()
