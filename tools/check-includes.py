#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Check the joins between the modules of vmmpower/ (issue 15).

    tools/check-includes.py [SOURCE_ROOT]      (default: the tree this script is in)

Reads SOURCE_ROOT/vmmpower/*.c and *.h.  A module is a file name without its
extension (control.c and control.h are module "control"; render.c alone is
module "render").  Module X depends on Y if X.c or X.h has `#include "Y.h"`
and vmmpower/Y.h exists.  Reports, and exits 1 if there is any:

  cycle:     every strongly connected component of more than one module;
  discovery: every discovery module (DISCOVERY below) whose .c or .h reaches
             placement.h (the planner), directly or through our headers
             (the closure of #include over vmmpower/*.h), with the chain;
  long:      every function of vmmpower/*.c but placement.c longer than
             MAX_FUNCTION_LINES, counted from the line of its opening `{` to
             the line of its closing `}`, both included (functions are written
             kernel style: `{` and `}` alone in column 0).

Prints "check-includes: OK" and exits 0 when clean; exits 2 on usage errors.
Python 3 standard library only.
"""
import glob
import os
import re
import sys

DISCOVERY = ("vm", "vm_policy", "libvirt_src", "procscan", "qmp", "vcpu_track", "guest_hint", "hint_proto",
             "kvmstat", "pcpu_stat", "schedstat", "topology")
PLANNER_HEADER = "placement.h"
MAX_FUNCTION_LINES = 149
LONG_EXEMPT = ("placement.c",)  # the planner's workspace set-up, exempt by decision (issue 15)

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
OPEN_RE = re.compile(r'^\{\s*(/\*.*)?$')
SIGNATURE_START_RE = re.compile(r'^[A-Za-z_]')
NAME_RE = re.compile(r'([A-Za-z_][A-Za-z_0-9]*)\s*\(')


def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def includes_of(path, headers):
    """Our headers (names in headers) that path includes, in order."""
    out = []
    for line in read_lines(path):
        m = INCLUDE_RE.match(line)
        if m and m.group(1) in headers and m.group(1) not in out:
            out.append(m.group(1))
    return out


def module_graph(files, headers):
    graph = {}
    for path in files:
        name = os.path.basename(path)
        mod = name.rsplit(".", 1)[0]
        deps = graph.setdefault(mod, set())
        for h in includes_of(path, headers):
            if h[:-2] != mod:
                deps.add(h[:-2])
    return graph


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def chain_to(start_files, target, header_includes, src):
    """Shortest include chain from one of start_files to target through our headers, or None."""
    parent = {f: None for f in start_files}
    queue = []
    for f in start_files:
        for h in includes_of(os.path.join(src, f), header_includes):
            if h not in parent:
                parent[h] = f
                queue.append(h)
    while queue:
        h = queue.pop(0)
        if h == target:
            chain = [h]
            while parent[chain[-1]] is not None:
                chain.append(parent[chain[-1]])
            return list(reversed(chain))
        for g in header_includes[h]:
            if g not in parent:
                parent[g] = h
                queue.append(g)
    return None


def long_functions(path, limit):
    """(lines, name, first line number) of each function of path longer than limit."""
    lines = read_lines(path)
    out = []
    i = 0
    while i < len(lines):
        if not OPEN_RE.match(lines[i]):
            i += 1
            continue
        # The signature: back to the line that starts in column 0 (continuations are indented).
        j = i - 1
        while j > 0 and not SIGNATURE_START_RE.match(lines[j]):
            j -= 1
        signature = " ".join(lines[j:i])
        paren = signature.find("(")
        end = i + 1
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
        if paren >= 0 and "=" not in signature[:paren]:  # else an initializer, not a function
            m = None
            for m in NAME_RE.finditer(signature[:paren + 1]):
                pass
            n = end - i + 1
            if m and n > limit:
                out.append((n, m.group(1), i + 1))
        i = end + 1
    return out


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(root, "vmmpower")
    files = sorted(glob.glob(os.path.join(src, "*.c")) + glob.glob(os.path.join(src, "*.h")))
    if not files:
        print("check-includes: no vmmpower/*.c or *.h under %s" % root, file=sys.stderr)
        return 2
    headers = {os.path.basename(f) for f in files if f.endswith(".h")}
    header_includes = {h: includes_of(os.path.join(src, h), headers) for h in headers}
    problems = []

    for comp in cycles(module_graph(files, headers)):
        problems.append("cycle: %s" % " <-> ".join(comp))

    for mod in DISCOVERY:
        own = [f for f in (mod + ".c", mod + ".h") if os.path.exists(os.path.join(src, f))]
        chain = chain_to(own, PLANNER_HEADER, header_includes, src)
        if chain:
            problems.append("discovery: %s reaches %s: %s" % (mod, PLANNER_HEADER, " -> ".join(chain)))

    for path in sorted(glob.glob(os.path.join(src, "*.c"))):
        if os.path.basename(path) in LONG_EXEMPT:
            continue
        for n, name, line in long_functions(path, MAX_FUNCTION_LINES):
            problems.append("long: vmmpower/%s:%d: %s() is %d lines (at most %d)" %
                            (os.path.basename(path), line, name, n, MAX_FUNCTION_LINES))

    for p in problems:
        print("check-includes: " + p)
    if problems:
        print("check-includes: %d problem(s)" % len(problems))
        return 1
    print("check-includes: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
