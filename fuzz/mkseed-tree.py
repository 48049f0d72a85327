#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Write a directory tree as one fuzz input in the format of fuzz/fuzz-tree.h:
records "relative/path\\ncontent" separated by NUL bytes, files in sorted order,
NUL bytes in content written as 0x01.
Usage: fuzz/mkseed-tree.py DIR [PREFIX] > SEED   (PREFIX is prepended to every path)"""
import os
import sys

top = sys.argv[1]
prefix = sys.argv[2] if len(sys.argv) > 2 else ""
recs = []
for dirpath, dirnames, filenames in os.walk(top):
    dirnames.sort()
    rel = os.path.relpath(dirpath, top)
    if not filenames and not dirnames and rel != ".":
        recs.append(os.path.join(prefix, rel).encode())
    for f in sorted(filenames):
        if f == ".keep":
            recs.append(os.path.join(prefix, rel).encode())
            continue
        p = os.path.normpath(os.path.join(prefix, rel, f))
        with open(os.path.join(dirpath, f), "rb") as fh:
            recs.append(p.encode() + b"\n" + fh.read().replace(b"\0", b"\1"))
sys.stdout.buffer.write(b"\0".join(recs))
