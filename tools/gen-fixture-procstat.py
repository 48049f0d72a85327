#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""
Fixtures for vmmpower/pcpu_stat.c under tests/data/procstat/<name>/:

  stat.0, stat.1   two /proc/stat snapshots
  idle.0, idle.1   cpuidle counters at the same instants, one line per
                   "cpu state time_us usage"
  meta             "topology <fixture-name>" and "wall_ns <ns between snapshots>"
  expected.txt     per-CPU ratios computed here, independently of the C code:
                   "cpu busy steal res0 res1 ... | wakeups0 wakeups1 ..."

Usage:
  gen-fixture-procstat.py record DIR TOPOLOGY SECONDS  # snapshot this host twice
  gen-fixture-procstat.py synth-xeon DIR               # synthetic 32-CPU SPR period
  gen-fixture-procstat.py expected DIR                 # (re)compute expected.txt
"""
import glob
import os
import re
import sys
import time


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def snapshot_idle(sysfs="/sys"):
    out = []
    for d in sorted(glob.glob(sysfs + "/devices/system/cpu/cpu[0-9]*"), key=lambda p: int(p.rsplit("cpu", 1)[1])):
        cpu = int(d.rsplit("cpu", 1)[1])
        for s in sorted(glob.glob(d + "/cpuidle/state[0-9]*"), key=lambda p: int(p.rsplit("state", 1)[1])):
            k = int(s.rsplit("state", 1)[1])
            t = open(s + "/time").read().strip()
            u = open(s + "/usage").read().strip()
            out.append("%d %d %s %s\n" % (cpu, k, t, u))
    return "".join(out)


def record(d, topo, seconds):
    os.makedirs(d, exist_ok=True)
    t0 = time.monotonic_ns()
    write(d + "/stat.0", open("/proc/stat").read())
    write(d + "/idle.0", snapshot_idle())
    time.sleep(seconds)
    t1 = time.monotonic_ns()
    write(d + "/stat.1", open("/proc/stat").read())
    write(d + "/idle.1", snapshot_idle())
    write(d + "/meta", "topology %s\nwall_ns %d\n" % (topo, t1 - t0))


def stat_text(rows):
    tot = [sum(r[i] for r in rows) for i in range(10)]
    lines = ["cpu  " + " ".join(map(str, tot))]
    lines += ["cpu%d " % i + " ".join(map(str, r)) for i, r in enumerate(rows)]
    lines += ["intr 123456 0 9 0", "ctxt 987654", "btime 1764730000", "processes 4242",
              "procs_running 3", "procs_blocked 0", "softirq 5555 0 1 2 3 4 5 6 7 8 9"]
    return "\n".join(lines) + "\n"


def synth_xeon(d):
    """One 1 s period (USER_HZ=100: 100 ticks per CPU) on the 32-CPU xeon-spr-2s
    fixture: CPU i runs (3*i) % 101 ticks of user, some system/irq, no steal
    except on the last 4 CPUs; idle time split over POLL/C1/C1E/C6."""
    os.makedirs(d, exist_ok=True)
    r0, r1, i0, i1 = [], [], [], []
    for c in range(32):
        base = [100000 + c, 50, 20000 + 7 * c, 9000000, 300, 10, 20, 0, 0, 0]
        busy_user = (3 * c) % 61
        sysd, irq, soft = 5, 1, 2
        steal = 4 if c >= 28 else 0
        iowait = 3 if c % 5 == 0 else 0
        idle = 100 - busy_user - sysd - irq - soft - steal - iowait
        delta = [busy_user, 0, sysd, idle, iowait, irq, soft, steal, 0, 0]
        r0.append(base)
        r1.append([a + b for a, b in zip(base, delta)])
        # idle residency in us over the 1 s wall period: (idle+iowait) ticks * 10 ms
        idle_us = (idle + iowait) * 10000
        split = [idle_us // 100, idle_us // 10, idle_us // 5]  # POLL, C1, C1E; rest C6
        split.append(idle_us - sum(split))
        for k in range(4):
            t0, u0 = 1000000 * (k + 1) + c, 5000 * (k + 1)
            i0.append("%d %d %d %d\n" % (c, k, t0, u0))
            i1.append("%d %d %d %d\n" % (c, k, t0 + split[k], u0 + 10 * (k + 1) + c))
    write(d + "/stat.0", stat_text(r0))
    write(d + "/stat.1", stat_text(r1))
    write(d + "/idle.0", "".join(i0))
    write(d + "/idle.1", "".join(i1))
    write(d + "/meta", "topology xeon-spr-2s\nwall_ns 1000000000\n")


def parse_stat(path):
    rows = {}
    for line in open(path):
        m = re.match(r"cpu(\d+) (.*)", line)
        if m:
            v = [int(x) for x in m.group(2).split()] + [0] * 10
            rows[int(m.group(1))] = v[:10]
    return rows


def parse_idle(path):
    res = {}
    for line in open(path):
        c, k, t, u = map(int, line.split())
        res.setdefault(c, {})[k] = (t, u)
    return res


def expected(d):
    meta = dict(l.split() for l in open(d + "/meta") if l.strip())
    wall = int(meta["wall_ns"])
    s0, s1 = parse_stat(d + "/stat.0"), parse_stat(d + "/stat.1")
    i0, i1 = parse_idle(d + "/idle.0"), parse_idle(d + "/idle.1")
    out = []
    for c in sorted(s1):
        a, b = s0[c], s1[c]
        dv = [y - x for x, y in zip(a, b)]
        busy = dv[0] + dv[1] + dv[2] + dv[5] + dv[6] + dv[7]
        idle = dv[3] + dv[4]
        tot = busy + idle
        br = busy / tot if tot else 0.0
        sr = dv[7] / tot if tot else 0.0
        res, wk = [], []
        for k in sorted(i1.get(c, {})):
            (t0, u0), (t1, u1) = i0[c][k], i1[c][k]
            res.append(min(1.0, max(0.0, (t1 - t0) * 1000 / wall)))
            wk.append(u1 - u0)
        s = sum(res)
        if s > 1:
            res = [x / s for x in res]
        out.append("%d %.9f %.9f %s | %s\n" % (c, br, sr, " ".join("%.9f" % x for x in res),
                                              " ".join(map(str, wk))))
    write(d + "/expected.txt", "".join(out))


def main():
    cmd = sys.argv[1]
    if cmd == "record":
        record(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        expected(sys.argv[2])
    elif cmd == "synth-xeon":
        synth_xeon(sys.argv[2])
        expected(sys.argv[2])
    elif cmd == "expected":
        expected(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
