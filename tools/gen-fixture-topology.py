#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""
Generate the synthetic sysfs fixture trees under tests/data/topology/:

  xeon-spr-2s     2-socket Intel Xeon Sapphire Rapids-like host, scaled down
                  to 2 packages x 8 cores x 2 threads = 32 CPUs
  epyc-genoa-1s   1-socket AMD EPYC Genoa-like host, scaled down to
                  4 CCDs (one CCX each) x 8 cores x 2 threads = 64 CPUs

Only the files vmmpower/topology.c reads are written, with the contents and
formatting the kernel uses (cpulists, trailing space in scaling_available_*
lists, cpu0 without an "online" file, POLL power 4294967295, ...).  The
numbers and their sources are documented in each fixture's README.md.  The
generated trees are committed; rerun this script only to change them:

  tools/gen-fixture-topology.py tests/data/topology
"""
import os
import shutil
import sys


def cpulist(cpus):
    cpus = sorted(cpus)
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


class Tree:
    def __init__(self, root):
        self.root = root

    def w(self, rel, content):
        p = os.path.join(self.root, "sys", rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(content + "\n")


def gen(root, *, packages, llcs_per_pkg, cores_per_llc, threads, node_of_pkg, l1d_kb, idle_driver,
        idle_gov, states, policy, cluster_base):
    if os.path.exists(os.path.join(root, "sys")):
        shutil.rmtree(os.path.join(root, "sys"))
    t = Tree(root)
    cores_per_pkg = llcs_per_pkg * cores_per_llc
    n_cores = packages * cores_per_pkg
    n = n_cores * threads
    cpu = "devices/system/cpu"
    allc = list(range(n))
    for f in ("possible", "present", "online"):
        t.w("%s/%s" % (cpu, f), cpulist(allc))
    t.w(cpu + "/smt/active", "1" if threads > 1 else "0")
    t.w(cpu + "/cpuidle/current_driver", idle_driver)
    t.w(cpu + "/cpuidle/current_governor", idle_gov)
    t.w(cpu + "/cpuidle/current_governor_ro", idle_gov)

    # Linux x86 enumeration: first thread of every core, package 0 then
    # package 1, then the second threads in the same order.
    def cpu_of(pkg, core, thr):
        return thr * n_cores + pkg * cores_per_pkg + core

    nodes = {}
    for c in allc:
        thr, rest = divmod(c, n_cores)
        pkg, core = divmod(rest, cores_per_pkg)
        llc = core // cores_per_llc
        d = "%s/cpu%d" % (cpu, c)
        if c != 0:
            t.w(d + "/online", "1")
        sib = [cpu_of(pkg, core, x) for x in range(threads)]
        pkgcpus = [cpu_of(pkg, k, x) for k in range(cores_per_pkg) for x in range(threads)]
        llccpus = [cpu_of(pkg, k, x) for k in range(llc * cores_per_llc, (llc + 1) * cores_per_llc)
                   for x in range(threads)]
        tp = d + "/topology/"
        t.w(tp + "physical_package_id", str(pkg))
        t.w(tp + "die_id", "0")
        t.w(tp + "cluster_id", str(cluster_base * pkg + core))
        t.w(tp + "core_id", str(core))
        for f in ("thread_siblings_list", "core_cpus_list"):
            t.w(tp + f, cpulist(sib))
        for f in ("core_siblings_list", "package_cpus_list", "die_cpus_list"):
            t.w(tp + f, cpulist(pkgcpus))
        for idx, (lvl, typ, shared) in enumerate([(1, "Data", sib), (1, "Instruction", sib),
                                                  (2, "Unified", sib), (3, "Unified", llccpus)]):
            cp = "%s/cache/index%d/" % (d, idx)
            t.w(cp + "level", str(lvl))
            t.w(cp + "type", typ)
            t.w(cp + "shared_cpu_list", cpulist(shared))
        for k, (name, desc, lat, res, power) in enumerate(states):
            sp = "%s/cpuidle/state%d/" % (d, k)
            t.w(sp + "name", name)
            t.w(sp + "desc", desc)
            t.w(sp + "latency", str(lat))
            t.w(sp + "residency", str(res))
            t.w(sp + "disable", "0")
            t.w(sp + "power", str(power))
            # counters: a deterministic snapshot (pcpu_stat tests only need numbers)
            t.w(sp + "usage", str(1000 * (k + 1) + c))
            t.w(sp + "time", str(100000 * (k + 1) + 10 * c))
        # drivers/base/power/sysfs.c: every CPU device has it; 0 = no constraint
        t.w(d + "/power/pm_qos_resume_latency_us", "0")
        nodes.setdefault(node_of_pkg[pkg], []).append(c)
        if policy:
            pp = "%s/cpufreq/policy%d/" % (cpu, c)
            t.w(pp + "related_cpus", str(c))
            t.w(pp + "affected_cpus", str(c))
            for k, v in policy.items():
                t.w(pp + k, v)
    for nd, cpus in sorted(nodes.items()):
        t.w("devices/system/node/node%d/cpulist" % nd, cpulist(cpus))


POLL = ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0, 4294967295)

def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/topology"
    # Sapphire Rapids: drivers/idle/intel_idle.c spr_cstates[] (C1 1/1, C1E 2/4,
    # C6 290/800 us); intel_pstate active mode, one policy per CPU.
    gen(os.path.join(out, "xeon-spr-2s"), packages=2, llcs_per_pkg=1, cores_per_llc=8, threads=2,
        node_of_pkg=[0, 1], l1d_kb=48, idle_driver="intel_idle", idle_gov="menu",
        states=[POLL, ("C1", "MWAIT 0x00", 1, 1, 0), ("C1E", "MWAIT 0x01", 2, 4, 0),
                ("C6", "MWAIT 0x20", 290, 800, 0)],
        policy={"scaling_driver": "intel_pstate", "scaling_governor": "powersave",
                "cpuinfo_min_freq": "800000", "cpuinfo_max_freq": "3800000",
                "scaling_min_freq": "800000", "scaling_max_freq": "3800000",
                "base_frequency": "2000000",
                "scaling_available_governors": "performance powersave",
                "energy_performance_preference": "balance_performance",
                "energy_performance_available_preferences":
                    "default performance balance_performance balance_power power "},
        cluster_base=64)
    # Genoa: acpi-cpufreq with the _PSS P-states P2..P0, acpi_idle POLL/C1/C2.
    gen(os.path.join(out, "epyc-genoa-1s"), packages=1, llcs_per_pkg=4, cores_per_llc=8, threads=2,
        node_of_pkg=[0], l1d_kb=32, idle_driver="acpi_idle", idle_gov="menu",
        states=[POLL, ("C1", "ACPI FFH MWAIT 0x0", 1, 2, 0), ("C2", "ACPI IOPORT 0x814", 400, 800, 0)],
        policy={"scaling_driver": "acpi-cpufreq", "scaling_governor": "schedutil",
                "cpuinfo_min_freq": "1500000", "cpuinfo_max_freq": "2400000",
                "scaling_min_freq": "1500000", "scaling_max_freq": "2400000",
                "scaling_available_frequencies": "2400000 2200000 1500000 ",
                "scaling_available_governors":
                    "conservative ondemand userspace powersave performance schedutil "},
        cluster_base=0)


if __name__ == "__main__":
    main()
