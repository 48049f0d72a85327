#!/usr/bin/env python3
"""The daemon acts on its plan with real guests (issue #3): two lightly loaded TCG guests
under libvirt and one plain QEMU guest are packed onto one pCPU of this machine, the other
pCPU's measured idle residency (cpuidle `time` counters, or /proc/stat's idle where the host
has no cpuidle states) rises above 90% while the plan is
packed (most of the window: a burst of waiting may grow it for a few seconds) and a work
counter inside each guest keeps within 10% of its unpacked rate (the mean of a window before
the daemon and one after it); when one guest turns
busy the plan grows at once; on SIGTERM every pin goes back to what it was.  At the default
queueing budget the vCPU threads' run-queue wait (schedstat) with the daemon stays within the
budget's promise against the host without it.

Run: meson test -C build --suite integration packing -v   (root; real libvirtd)."""

import concurrent.futures
import glob
import os
import statistics
import sys
import threading
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmlib  # noqa: E402
from daemonlib import Daemon  # noqa: E402

SRC = os.environ.get("VMMPOWER_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
WINDOW_S = 20          # measurement window for rates and idle residency
LIGHT_SLEEP_S = "0.5"  # light loop: BATCH iterations, then this sleep (a fork under TCG: ~2.5% of a CPU each)
LIGHT_SHARE = 0.03     # work of one light loop, share of what a busy loop does per second
WAIT_PLANNER_EXTRA = {}  # e.g. {"Profile": "batch"} to see the test fail
WAIT_WINDOW_S = 15      # the wait test's windows: 4 without the daemon, 3 with it, alternating
WAIT_SHARE = 0.08      # the wait test's loops: the batch profile packs the three onto one pCPU, where they queue


def log(msg):
    print("[packing] " + msg, flush=True)


def cpu_idle_us(cpu):
    """Idle time of one pCPU (microseconds): the sum of its cpuidle stateN/time where the host
    has cpuidle states; else (cpuidle driver "none": the idle loop halts with no state to
    count) the idle column of /proc/stat, which the kernel keeps from its nohz idle time."""
    files = glob.glob("/sys/devices/system/cpu/cpu%d/cpuidle/state*/time" % cpu)
    if files:
        total = 0
        for f in files:
            with open(f) as fh:
                total += int(fh.read())
        return total
    with open("/proc/stat") as fh:
        for line in fh:
            fields = line.split()
            if fields[0] == "cpu%d" % cpu:
                return int(fields[4]) * 1000000 // os.sysconf("SC_CLK_TCK")
    raise RuntimeError("cpu%d not in /proc/stat" % cpu)


def thread_affinity(pid, tid):
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return None


def host_cpu_by_name():
    """Clock ticks of CPU time so far: the host's busy total ("busy", /proc/stat), and per group
    of processes (utime + stime of /proc/PID/stat): vmmpowerd, libvirt (libvirtd and virt*d),
    qemu (qemu-system-*), other."""
    out = {"vmmpowerd": 0, "libvirt": 0, "qemu": 0, "other": 0}
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    out["busy"] = sum(v) - v[3] - v[4]  # without idle and iowait
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        ticks = sum(int(x) for x in st[st.rindex(")") + 2:].split()[11:13])
        key = ("vmmpowerd" if comm == "vmmpowerd" else "libvirt" if comm == "libvirtd" or
               (comm.startswith("virt") and comm.endswith("d")) else "qemu" if comm.startswith("qemu-system")
               else "other")
        out[key] += ticks
    return out


def n_cpus():
    return len(os.sched_getaffinity(0))


def parse_cpulist(s):
    out = set()
    for part in (s or "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def llc_of(cpu):
    """The CPUs sharing cpu's last-level cache (its package's when sysfs has no L3)."""
    path = "/sys/devices/system/cpu/cpu%d/cache/index3/shared_cpu_list" % cpu
    if not os.path.exists(path):
        path = "/sys/devices/system/cpu/cpu%d/topology/package_cpus_list" % cpu
    with open(path) as f:
        return frozenset(parse_cpulist(f.read().strip()))


def core_model(shipped):
    """The shipped model's core-level terms for this host: its top level alone (this host has no
    cpufreq) and its idle states, without the package domain.  With both CPUs in one package the
    whole model's verdict on packing three light guests turns on the level a packed CPU needs and
    on the package's all-idle time under independent busy periods: spreading is cheaper below a
    joint load of ~0.2 and above ~0.4, packing by 0.1-1.5 W in between, where these guests are
    (0.25-0.30) and often at a point where it is 0.08 W; the plan then went back and forth.  The
    core terms alone say what packing saves here (an empty core reaches C6), 7-70 mW for a joint
    load of 0.12-0.54 (tools: plan_compute() on this host's sysfs; docs/energy-model.md §2)."""
    with open(shipped) as f:
        text = f.read()
    # Core terms only: the calibrated model's wall-power terms (platform, PSU), its package power
    # limit, turbo table and wake-up energies are not core-level idle terms (they make the plan on
    # this 2-CPU host turn on a few mW either way and go back and forth).
    text = "\n".join(l for l in text.splitlines()
                     if l.split("=")[0].strip() not in ("PackagePowerLimitMW", "PlatformPowerMW",
                                                        "PlatformBusyPowerMW", "PsuEfficiency",
                                                        "MaxActiveCores", "WakeEnergyUJ")) + "\n"
    head, *levels = text.split("[PerfLevel]")
    top, idle = levels[-1].split("[IdleState]", 1)
    idle = "[IdleState]" + idle.split("[IdleDomain]", 1)[0]
    head = head.replace("PackageIdleAllPackages = yes", "PackageIdleAllPackages = no")
    head = head.replace("Name = xeon-spr-2s", "Name = xeon-spr-2s-core-terms")
    fd, path = tempfile.mkstemp(prefix="vmmpt-core-", suffix=".model")
    with os.fdopen(fd, "w") as f:
        f.write(head + "[PerfLevel]" + top + idle)
    return path


class Packing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        vmlib.require_root()
        vmlib.ensure_libvirtd()
        vmlib.ensure_guest_image()
        cls.guests = [vmlib.define_and_start_domain("pack-a", 1),
                      vmlib.define_and_start_domain("pack-b", 1),
                      vmlib.start_plain_qemu("pack-c", 1, qmp=False)]
        for g in cls.guests:
            log("%s booted in %.1fs" % (g.name, g.wait_booted(180)))
        cls.d = None

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.stop()
        for g in getattr(cls, "guests", []):
            g.destroy()

    def affinities(self):
        """{(guest name, tid): Cpus_allowed_list} of every vCPU thread and the main thread."""
        out = {}
        for g in self.guests:
            for tid in list(g.vcpu_tids().values()) + [g.pid]:  # vCPUs and the main (emulator) thread
                out[(g.name, tid)] = thread_affinity(g.pid, tid)
        return out

    def measure(self, what, busy_cpu=None, other=None, daemon=None):
        """Work rate of each guest's light loop and the idle share of each pCPU over WINDOW_S.

        Packed (busy_cpu given): also the idle share of pCPU `other` over the time every vCPU
        was pinned to `busy_cpu` alone (sampled every 0.5 s from /proc, by a thread that runs
        on `busy_cpu`; a slice counts when all were so pinned at both of its ends), and that
        time's share of the window.  With `daemon`, a sample that finds them not so pinned also
        asks the daemon for its plan (only then: the query may wake the other pCPU), and the
        plans' reasons are logged: why the window was not all packed."""
        samples, stop, unpacked_why = [], threading.Event(), {}
        vcpus = [(g.pid, tid) for g in self.guests for tid in g.vcpu_tids().values()] if busy_cpu is not None else []

        def poll():
            os.sched_setaffinity(0, {busy_cpu})  # this thread only
            while True:
                t, idle = time.monotonic(), cpu_idle_us(other)
                packed = all(thread_affinity(pid, tid) == str(busy_cpu) for pid, tid in vcpus)
                samples.append((t, idle, packed))
                if not packed and daemon is not None:
                    try:
                        p = daemon.json("plan")
                        why = "%s (%s)" % (p.get("decision"), p.get("reason", "")[:160])
                    except Exception as e:  # a diagnostic: never fails the window
                        why = "plan not read: %s" % e
                    unpacked_why[why] = unpacked_why.get(why, 0) + 1
                if stop.wait(0.5):
                    return
        poller = threading.Thread(target=poll) if busy_cpu is not None else None
        if poller:
            poller.start()
        idle0 = [cpu_idle_us(c) for c in range(n_cpus())]
        t0 = time.monotonic()
        # The same window for all, staggered by 0.4 s: the agent's `rate` forks a few processes
        # at both ends of its window, and three guests forking at the same instant on one pCPU
        # make a burst of run-queue wait that the test itself would have caused.
        def one(ig):
            time.sleep(0.4 * ig[0])
            return ig[1].console.rate(WINDOW_S)[0]
        with concurrent.futures.ThreadPoolExecutor(len(self.guests)) as ex:
            rates = list(ex.map(one, enumerate(self.guests)))
        dt = time.monotonic() - t0
        idle = [(cpu_idle_us(c) - idle0[c]) / 1e6 / dt for c in range(n_cpus())]
        log("%s: work rates %s it/s, pCPU idle %s over %.1fs" %
            (what, rates, " ".join("cpu%d=%.1f%%" % (c, 100 * x) for c, x in enumerate(idle)), dt))
        if not poller:
            return rates, idle, None, None
        stop.set()
        poller.join()
        span = samples[-1][0] - samples[0][0]
        packed_s = packed_idle = 0.0
        for (ta, ia, na), (tb, ib, nb) in zip(samples, samples[1:]):
            if na and nb:
                packed_s += tb - ta
                packed_idle += (ib - ia) / 1e6
        idle_packed = packed_idle / packed_s if packed_s > 0 else 0.0
        log("%s: every vCPU pinned to pCPU %d alone %.1f of %.1fs sampled; pCPU %d idle %.1f%% over that time" %
            (what, busy_cpu, packed_s, span, other, 100 * idle_packed))
        for why, n in sorted(unpacked_why.items(), key=lambda x: -x[1])[:5]:
            log("%s: not packed in %d samples, the plan: %s" % (what, n, why))
        return rates, idle, idle_packed, packed_s / span if span > 0 else 0.0

    def start_light_loops(self, share):
        """Calibrate on this machine (a busy loop's rate, one guest at a time) and start a light
        loop doing `share` of that work in every guest; the iterations per LIGHT_SLEEP_S.
        Every loop a test before left is stopped first: the guest agent's `busy` and `light`
        answer with the loop already running on that vCPU, so without this the calibration
        timed the last test's light loop and two guests kept its heavier loops (the batch test
        ran after the wait test with two vCPUs at ~18% instead of ~3%: more wait noise, the
        plan grew for most of a CI's window)."""
        for g in self.guests:
            g.console.idle()
        a = self.guests[0]
        a.console.busy(0)
        full = a.console.rate(3)[0]
        a.console.idle(0)
        batch = max(50, int(full * share * float(LIGHT_SLEEP_S)))
        log("busy loop %d it/s: light loops of %d iterations per %ss" % (full, batch, LIGHT_SLEEP_S))
        for g in self.guests:
            g.console.light(0, batch, LIGHT_SLEEP_S)
        time.sleep(3)
        return batch

    def vcpu_schedstat(self):
        """{(guest, tid): (run ns, run-queue wait ns, timeslices)} of every vCPU thread
        (/proc/PID/task/TID/schedstat: what the tracker reads as run_delay)."""
        out = {}
        for g in self.guests:
            for tid in g.vcpu_tids().values():
                with open("/proc/%d/task/%d/schedstat" % (g.pid, tid)) as f:
                    out[(g.name, tid)] = tuple(int(x) for x in f.read().split()[:3])
        return out

    def wait_window(self, what):
        """The vCPU threads' run-queue wait over WAIT_WINDOW_S as a share of the window (mean over the
        vCPUs; logged with the mean per timeslice), and what else ran on the host meanwhile
        (logged: the host's busy share, and the CPU of vmmpowerd, libvirt's daemons and the
        guests' QEMU processes, in % of one CPU)."""
        s0, t0, c0 = self.vcpu_schedstat(), time.monotonic(), host_cpu_by_name()
        time.sleep(WAIT_WINDOW_S)
        s1, dt, c1 = self.vcpu_schedstat(), time.monotonic() - t0, host_cpu_by_name()
        delay = sum(s1[k][1] - s0[k][1] for k in s0)
        slices = sum(s1[k][2] - s0[k][2] for k in s0)
        per_slice_us = delay / 1000.0 / max(slices, 1)
        share = delay / 1e9 / dt / len(s0)
        cpu = {k: 100.0 * (c1.get(k, 0) - c0.get(k, 0)) / os.sysconf("SC_CLK_TCK") / dt for k in c1}
        log("%s: vCPU run-queue wait %.1f us per timeslice (%d timeslices), %.3f%% of the window; "
            "host busy %.1f%% of its CPUs, vmmpowerd %.1f%%, libvirt %.1f%%, QEMU %.1f%%, other %.1f%% of a CPU" %
            (what, per_slice_us, slices, 100.0 * share, cpu.get("busy", 0) / n_cpus(), cpu.get("vmmpowerd", 0),
             cpu.get("libvirt", 0), cpu.get("qemu", 0), cpu.get("other", 0)))
        return share

    def test_default_budget_wait(self):
        """Issue 14: at the default queueing budget (latency profile) the vCPU threads' run-queue
        wait with vmmpowerd running stays within what the budget promises against the host without
        it: as a share of the time at most 1.5 x the unmanaged host's (+ 0.05 points of noise),
        the simulator's ratio against B3.  The guests' own noise moves the wait from window to
        window, with the QEMU processes' CPU (stop 33: one unmanaged window at 2.17% with QEMU at
        58% of a CPU, the next ones 0.43-0.49% at 49-50%; vmmpowerd itself 0.1% of a CPU, libvirt
        0%), so the windows alternate, unmanaged - managed - ... - unmanaged (4 and 3), and the
        medians are compared: one window caught in a burst of the guests' noise does not decide,
        a plan that queues the vCPUs shows in every managed window.  (Stop 32 compared means of 3
        and 2 windows of 20 s: a CI of stop 33 read 0.875% against 0.647%, and a run of this test
        after it 0.887% against 0.517%, over its limit, with the plan pinning nothing tighter than
        both pCPUs.)
        The model is the one the batch test packs with, so packing is what the energy alone would
        choose; the budget decides.  With WAIT_PLANNER_EXTRA {"Profile": "batch"} the three loops
        are packed onto one pCPU and the test fails."""
        if n_cpus() < 2:
            self.skipTest("needs 2 pCPUs")
        self.start_light_loops(WAIT_SHARE)
        before_aff = self.affinities()
        offs, ons = [self.wait_window("no daemon, window 1")], []
        model = core_model(os.path.join(SRC, "config", "models", "xeon-spr-2s.model"))
        self.addCleanup(os.unlink, model)
        for k in range(3):
            self.__class__.d = d = Daemon(sections={"Planner": dict({"ShrinkDwell": "2s", "ModelFile": model},
                                                                   **WAIT_PLANNER_EXTRA)}).start()
            p0 = d.status()["periods"]
            d.wait_for(lambda: d.status()["periods"] - p0 >= 5 and d.json("plan").get("apply", {}).get("enabled"),
                       60, "five periods of applied plans")
            ons.append(self.wait_window("vmmpowerd, default budget, window %d" % (k + 1)))
            plan = d.json("plan")
            sets = [s for s in plan.get("sets", []) if s.get("cpus")]
            log("plan: %s, %d active pCPUs; pack sets %s" % (plan["decision"], plan["n_active"], sets))
            for st in sets:  # the closed loop only adds caution, never under the floor a set's overrun left
                self.assertGreaterEqual(st["corr"], 1.0, st)
                self.assertGreaterEqual(st["corr"] + 1e-3, st["corr_floor"], st)
            d.stop()
            self.__class__.d = None
            self.assertEqual(self.affinities(), before_aff)
            offs.append(self.wait_window("no daemon, window %d" % (k + 2)))
        off, on = statistics.median(offs), statistics.median(ons)
        limit = 1.5 * off + 0.0005
        log("run-queue wait: %.3f%% of the time with vmmpowerd (median of %d windows) against %.3f%% without "
            "(median of the %d around them; limit %.3f%%)" % (100 * on, len(ons), 100 * off, len(offs), 100 * limit))
        self.assertLessEqual(on, limit)

    def test_pack_grow_restore(self):
        if n_cpus() < 2:
            self.skipTest("needs 2 pCPUs")
        a = self.guests[0]
        batch = self.start_light_loops(LIGHT_SHARE)
        before_aff = self.affinities()
        base_rates, base_idle, _, _ = self.measure("unpacked (no daemon)")

        # The energy model: this host's topology with the per-core figures of the shipped
        # Sapphire Rapids model (C1 1/1 us, C1E 2/4 us, C6 290/800 us, intel_idle spr_cstates).
        # This machine is itself a VM: its idle states (haltpoll, or none at all) say nothing about power,
        # and the model derived from it (all idle shallow, one package) finds no saving in
        # packing, rightly; the test is about the daemon acting on a plan that packs.
        model = core_model(os.path.join(SRC, "config", "models", "xeon-spr-2s.model"))
        # The default wait budget (5%): on this 2-CPU TCG host a packed vCPU's wait in one
        # period goes over 5% from the guests' own forks (measured 1-6%); on a CPU with room the
        # plan grows on the decayed wait (wait_avg) or on one period over 4x the budget, so that
        # noise does not make it cycle grow -> shrink -> grow (with a one-period rule it was
        # packed ~15% of the window).
        self.addCleanup(os.unlink, model)
        # The batch profile: three vCPUs of ~3% each on one pCPU is the headroom rule's packing.
        # The latency profile (the default) would not do it: a wake-up finds one of the other
        # two busy about 6% of the time, over its 1% budget (the wait model, queueing.h).
        # MoveCooldown off (test_move_cooldown has it): the TCG guests' own noise grows the plan
        # every few seconds here, and each repack held by the batch profile's cooldown (60 s; 4 s
        # tried) leaves the window mostly unpacked (CI: packed 24% of it at 4 s), which is not
        # what this test measures.
        # WaitBudgetPercent 10 (the default 5): a grow on a vCPU's wait is then one over 10%
        # decayed or 40% in one period.  At 5% the guests' own noise grew the plan every few
        # seconds here (stop 33: packed 17% of a CI's window, 61% of a run after it, each gap a
        # grow on one vCPU's wait), which is not what this test measures either; the grow it
        # checks below is on load (a vCPU over the headroom), not on wait.
        self.__class__.d = d = Daemon(sections={"Planner": {"ShrinkDwell": "2s", "ModelFile": model,
                                                            "Profile": "batch", "MoveCooldown": "0s",
                                                            "WaitBudgetPercent": "10"}}).start()
        # Packed: the plan has one active pCPU and every vCPU is pinned to it.
        def packed():
            p = d.json("plan")
            if not p.get("apply", {}).get("enabled") or p.get("n_active") != 1 or len(p.get("vcpus", [])) != 3:
                return False
            cpu = p["vcpus"][0]["cpu"]
            return all(v == str(cpu) for v in self.affinities().values())
        t0 = time.monotonic()
        d.wait_for(packed, 60, "all three vCPUs pinned to one pCPU")
        plan = d.json("plan")
        active = plan["vcpus"][0]["cpu"]
        other = 1 - active
        log("packed onto CPU %d %.1fs after start: %s; modelled %.0f mW vs spread %.0f mW" %
            (active, time.monotonic() - t0, plan["reason"], plan["plan_mw"], plan["spread_mw"]))
        out = vmlib.virsh("vcpupin", a.name).stdout
        self.assertIn(str(active), out)
        self.assertFalse(plan["pins_host_wide"])  # a core asleep: the pack set is its LLC's
        time.sleep(2)
        plans0 = d.status()["periods"]
        rates, idle, idle_packed, packed_share = self.measure("packed", active, other, daemon=d)
        plan = d.json("plan")
        utils = ["%.3f" % v["util"] for v in plan["vcpus"]]
        log("after the window (%d periods): %s, %d active pCPUs, vCPU util %s" %
            (d.status()["periods"] - plans0, plan["decision"], plan["n_active"], " ".join(utils)))
        # A vCPU waiting over the budget (decayed, or 4x it in one period) grows the plan at
        # once; the shrink packs again after its dwell (2 s here).  While grown, the vCPUs may
        # run on both pCPUs: the other pCPU's idle is judged over the time the plan was
        # packed, and that must be most of the window.
        t1 = time.monotonic()
        d.wait_for(packed, 20, "packed again after the dwell")
        log("packed (again) %.1fs after the window" % (time.monotonic() - t1))
        log("other pCPU %d idle %.1f%% while packed (%.1f%% over the whole window, %.0f%% of it "
            "packed; unpacked %.1f%%); work rate change %s" %
            (other, 100 * idle_packed, 100 * idle[other], 100 * packed_share, 100 * base_idle[other],
             " ".join("%+.1f%%" % (100.0 * (r - b) / b) for r, b in zip(rates, base_rates))))
        self.assertGreater(packed_share, 0.5)
        self.assertGreater(idle_packed, 0.90)

        # One guest turns busy: capacity grows at once (counted in control periods): the busy
        # vCPU overloads its CPU (last period's load over the packing headroom) and it or its
        # neighbours wait over the budget in that period: the overload the plan grows on.
        p0 = d.status()["periods"]
        a.console.idle(0)  # the light loop makes way for a busy one on the same vCPU
        t0 = time.monotonic()
        a.console.busy(0)
        seen = set()

        def grown_2():
            n = d.status()["periods"] - p0
            if n not in seen:  # what the planner sees, once a period
                seen.add(n)
                log("busy guest, period %d: %s" % (n, "; ".join(
                    "%s util %.3f (avg %.3f) wait %.3f (avg %.3f)" %
                    (vm["name"][-6:], v.get("util") or 0, v.get("util_avg") or 0, v.get("wait_ratio") or 0,
                     v.get("wait_avg") or 0) for vm in d.vms() for v in vm["vcpus"])))
            return d.json("plan")["n_active"] == 2
        d.wait_for(grown_2, 30, "the plan to grow to 2 pCPUs")
        grew_periods = d.status()["periods"] - p0
        grown = d.json("plan")
        log("busy guest: plan grew to 2 pCPUs after %d periods (%.1fs): %s, %s" %
            (grew_periods, time.monotonic() - t0, grown["decision"], grown["reason"]))
        self.assertLessEqual(grew_periods, 3)
        a_tid = a.vcpu_tids()[0]
        # PinSingleCPU = no (the default): a packed vCPU may run on every pCPU of its LLC
        # that the plan packs onto — its new pCPU among them, nothing else; a vCPU larger than
        # its set's balanced load (the busy one, most of the time) is pinned to its pCPU alone;
        # unless every core is awake at the top level (pins_host_wide): then every packed vCPU
        # may run on every pCPU of every set.
        def pinned_as_planned():
            plan = d.json("plan")
            vcpus = plan["vcpus"]
            mine = [v for v in vcpus if v["pid"] == a.pid][0]
            pack_set = {v["cpu"] for v in vcpus if llc_of(v["cpu"]) == llc_of(mine["cpu"])}
            aff = parse_cpulist(thread_affinity(a.pid, a_tid))
            if plan["pins_host_wide"]:
                want_set = {v["cpu"] for v in vcpus}
            else:
                want_set = {mine["cpu"]} if mine.get("alone") else pack_set
            return mine["cpu"] in aff and aff == want_set, mine
        d.wait_for(lambda: pinned_as_planned()[0], 10,
                   "the busy vCPU pinned to its pCPU alone or to its LLC's pack set, as planned")
        mine = pinned_as_planned()[1]
        log("busy vCPU's affinity: %s (plan: pCPU %d, %s)" %
            (thread_affinity(a.pid, a_tid), mine["cpu"], "alone" if mine.get("alone") else "pack set"))
        log("pins host-wide (every core awake at the top level): %s" % d.json("plan")["pins_host_wide"])
        a.console.idle(0)
        a.console.light(0, batch, LIGHT_SLEEP_S)

        # SIGTERM: every vCPU's affinity as before the daemon, libvirt's live pins too.
        st = d.json("status")["apply"]
        log("applier: %d pins, %d errors, %d retries, last pass %.0f us" %
            (st["pins"], st["pin_errors"], st["pin_retries"], st["last_pass_ns"] / 1000.0))
        d.stop()
        self.__class__.d = None
        after = self.affinities()
        self.assertEqual(after, before_aff)
        log("after SIGTERM: affinities restored %s" % sorted(set(after.values())))

        # The work rates: each guest's packed rate against its unpacked rate, the mean of a
        # window before the daemon and one after it, around the packed one.  This machine's
        # speed drifts between windows a minute apart (the busy-loop calibration moved 92,000 to
        # 114,000 it/s between runs of stop 33), and a single unpacked window before read one
        # guest 10.9% under while packed in a CI (every other run -2.7% to -8.2%); the windows
        # around it take a drift that moves all of them alike out of the comparison.
        time.sleep(3)  # the busy guest's light loop back at its pace
        after_rates, _, _, _ = self.measure("unpacked again (daemon stopped)")
        unpacked = [(b + x) / 2.0 for b, x in zip(base_rates, after_rates)]
        log("work rate packed against unpacked (mean of before %s and after %s): %s" %
            (base_rates, after_rates, " ".join("%+.1f%%" % (100.0 * (r - u) / u) for r, u in zip(rates, unpacked))))
        for g, r, u in zip(self.guests, rates, unpacked):
            self.assertGreater(r, 0.9 * u, "%s work rate %d vs unpacked %.0f" % (g.name, r, u))


if __name__ == "__main__":
    unittest.main(verbosity=2)
