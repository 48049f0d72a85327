#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Guard: no test changes the host's power knobs.

  host-knobs.py snapshot FILE   record every knob vmmpower's sysfs driver can write
  host-knobs.py check FILE      fail (exit 1, naming each knob) if one now differs

tests/meson.build runs 'snapshot' first and 'check' last in a test run (priorities,
alone: is_parallel false), so the unit and integration suites together must leave the
host's knobs as they found them.  Knobs: PM QoS and cpuidle 'disable' of every CPU,
cpufreq scaling_min/max_freq, scaling_governor and energy_performance_preference of every
policy, kvm halt_poll_ns, and lo's tx_queue_len (test_real_sysfs_clamp writes the one of
its own network namespace).  Exit 77 (skipped) for 'check' without a snapshot."""
import glob
import json
import sys

GLOBS = [
    "/sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us",
    "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable",
    "/sys/devices/system/cpu/cpufreq/policy[0-9]*/scaling_min_freq",
    "/sys/devices/system/cpu/cpufreq/policy[0-9]*/scaling_max_freq",
    "/sys/devices/system/cpu/cpufreq/policy[0-9]*/scaling_governor",
    "/sys/devices/system/cpu/cpufreq/policy[0-9]*/energy_performance_preference",
    "/sys/module/kvm/parameters/halt_poll_ns",
    "/sys/class/net/lo/tx_queue_len",
]


def read_all():
    out = {}
    for g in GLOBS:
        for p in sorted(glob.glob(g)):
            try:
                with open(p) as f:
                    out[p] = f.read()
            except OSError as e:
                out[p] = "<unreadable: %s>" % e.strerror
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("snapshot", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    path = sys.argv[2]
    now = read_all()
    if sys.argv[1] == "snapshot":
        with open(path, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
        print("host knobs: %d recorded in %s" % (len(now), path))
        return 0
    try:
        with open(path) as f:
            before = json.load(f)
    except FileNotFoundError:
        print("host knobs: no snapshot %s (the 'snapshot' test did not run): skipped" % path)
        return 77
    changed = [p for p in sorted(set(before) | set(now)) if before.get(p) != now.get(p)]
    for p in changed:
        print("host knob changed during the test run: %s: %r -> %r" % (p, before.get(p), now.get(p)))
    print("host knobs: %d checked, %d changed" % (len(now), len(changed)))
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
