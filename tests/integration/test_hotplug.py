#!/usr/bin/env python3
"""CPU hotplug under the running daemon: the real vmmpowerd binary (--dry-run) against a copy of
the 32-CPU xeon-spr-2s fixture sysfs tree (SysfsRoot) and a planted procfs (ProcfsRoot) holding
one plain-QEMU VM of 4 vCPU threads whose schedstat on-CPU time this test advances (each vCPU
~90% busy, so that the plan needs several pCPUs).  Nothing of the host is read for the VM or
written: the pids are above the kernel's PID_MAX_LIMIT, the dry run's applier only simulates,
libvirt and hints are off.

  1. the CPUs the first plan places vCPUs on are taken offline the way the kernel shows it
     (cpu/online, cpuN/online = 0, cpuN/topology/ and cache/ gone; each vCPU thread's stat
     still names the CPU it last ran on): within a few periods the daemon reads the topology
     again (vmmpower_topology_changes_total 1, vmmpower_cpus_online, `vmmpowerctl cpus`
     shows them offline, a log line names the old and new online lists) and no vCPU of the
     new plan is on an offline CPU;
  2. they are brought back online: vmmpower_topology_changes_total 2, all 32 online again,
     and the plan may use them (the planner's online CPUs are all 32 again);
  3. a tree whose cpu/online cannot be parsed, then a change whose topology cannot be read (a
     core_id that does not parse): each failure counted in vmmpower_topology_errors_total,
     logged once a streak, the running topology and plans kept; once readable, the change is
     taken at the next period.

Run: meson test -C build --suite integration hotplug -v"""

import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from daemonlib import Daemon, DaemonError  # noqa: E402

DATA = os.environ.get("VMMPOWER_TEST_DATA") or os.path.join(os.path.dirname(HERE), "data")
FIXTURE = os.path.join(DATA, "topology", "xeon-spr-2s", "sys")
PROCSTAT = os.path.join(DATA, "procstat", "xeon-spr-2s", "stat.0")
PID = 5000001            # > PID_MAX_LIMIT (4194304): no process of the host has it
N_VCPUS = 4
BUSY = 0.9               # share of wall time each vCPU is on a CPU
BASE_NS = 10 ** 15       # schedstat values keep their width (written in place, never truncated)
CPU_DIR = "devices/system/cpu"


def log(msg):
    print("[hotplug] " + msg, flush=True)


def _fixture_tool():
    """tools/gen-fixture-topology.py, for its cpulist() (the kernel's "0-3,8" form)."""
    spec = importlib.util.spec_from_file_location(
        "gen_fixture_topology", os.path.join(HERE, "..", "..", "tools", "gen-fixture-topology.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fmt_list = _fixture_tool().cpulist


class FakeVm:
    """<procfs>/<PID>: a QEMU main thread and N_VCPUS threads "CPU n/KVM", busy BUSY of the time."""

    def __init__(self, procfs, first_cpus):
        self.procfs = procfs
        self.tids = [PID + 1 + i for i in range(N_VCPUS)]
        base = os.path.join(procfs, str(PID))
        os.makedirs(os.path.join(base, "task"))
        self.write(os.path.join(base, "comm"), "qemu-system-x86\n")
        self.write(os.path.join(base, "cmdline"), "qemu-system-x86_64\0-name\0guest=hotplug-vm\0")
        self.write(os.path.join(base, "stat"), self.stat_line(PID, "qemu-system-x86", 0))
        for tid, name in [(PID, "qemu-system-x86")] + [(t, "CPU %d/KVM" % i) for i, t in enumerate(self.tids)]:
            d = os.path.join(base, "task", str(tid))
            os.makedirs(d)
            self.write(os.path.join(d, "comm"), name + "\n")
            self.write(os.path.join(d, "schedstat"), "%d %d 1\n" % (BASE_NS, BASE_NS))
        for i, tid in enumerate(self.tids):
            self.set_thread_cpu(tid, first_cpus[i % len(first_cpus)])
        self.t0 = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    @staticmethod
    def write(path, text):
        with open(path, "w") as f:
            f.write(text)

    @staticmethod
    def stat_line(tid, comm, cpu):
        # field 3 state, fields 4..38, field 39 processor, then the rest
        return "%d (%s) S %s %d %s\n" % (tid, comm, " ".join(["0"] * 35), cpu, " ".join(["0"] * 13))

    def set_thread_cpu(self, tid, cpu):
        self.write(os.path.join(self.procfs, str(PID), "task", str(tid), "stat"),
                   self.stat_line(tid, "CPU %d/KVM" % self.tids.index(tid), cpu))

    def run(self):
        # The tracker keeps the schedstat fds open: rewrite in place, same length.
        while not self.stop.wait(0.05):
            on = BASE_NS + int((time.monotonic() - self.t0) * 1e9 * BUSY)
            for tid in self.tids:
                fd = os.open(os.path.join(self.procfs, str(PID), "task", str(tid), "schedstat"), os.O_WRONLY)
                try:
                    os.pwrite(fd, ("%d %d 1\n" % (on, BASE_NS)).encode(), 0)
                finally:
                    os.close(fd)

    def close(self):
        self.stop.set()
        self.thread.join()


class Hotplug(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.fail("needs root")  # as the other integration tests: the daemon wants its state dirs
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.tmp = tempfile.mkdtemp(prefix="vmmpt-%d-hotplug-" % os.getpid(), dir=base)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.sys = os.path.join(self.tmp, "sys")
        shutil.copytree(FIXTURE, self.sys, symlinks=True)
        self.proc = os.path.join(self.tmp, "proc")
        os.makedirs(self.proc)
        shutil.copy(PROCSTAT, os.path.join(self.proc, "stat"))
        self.vm = FakeVm(self.proc, [0, 1, 2, 3])
        self.addCleanup(self.vm.close)
        self.n_cpus = 32
        self.online = set(range(self.n_cpus))
        self.d = None

    def start(self, dry_run=True):
        self.d = Daemon({"Daemon": {"SysfsRoot": self.sys, "ProcfsRoot": self.proc, "ControlPeriod": "250ms"},
                         "QEMU": {"ProcScan": "yes", "ProcScanInterval": "1s", "ProcScanUsers": "root"},
                         "Tracking": {"LoadHalfLife": "500ms"},
                         "Libvirt": {"Enabled": "no"}, "Hints": {"Enabled": "no"}},
                        args=["--dry-run"] if dry_run else [])
        self.d.start()
        self.addCleanup(self.d.stop)

    # -- the fixture tree, changed the way the kernel changes /sys on hotplug --

    def cpu_path(self, *parts):
        return os.path.join(self.sys, CPU_DIR, *parts)

    def set_online(self, cpus, on):
        for c in cpus:
            d = self.cpu_path("cpu%d" % c)
            FakeVm.write(os.path.join(d, "online"), "1\n" if on else "0\n")
            # offline CPUs publish neither topology/ nor cache/; the policy of a CPU alone in it
            # (intel_pstate: one per CPU) goes inactive, every read of it EBUSY, and the topology
            # leaves it out as it leaves out one that is gone
            for sub in (os.path.join(d, "topology"), os.path.join(d, "cache"),
                        self.cpu_path("cpufreq", "policy%d" % c)):
                src, dst = (sub + ".away", sub) if on else (sub, sub + ".away")
                if os.path.isdir(src):
                    os.rename(src, dst)
            (self.online.add if on else self.online.discard)(c)
        FakeVm.write(self.cpu_path("online"), fmt_list(self.online) + "\n")

    # -- what the daemon says --

    def metrics(self):
        rc, text, err = self.d.ctl("metrics")
        self.assertEqual(rc, 0, err)
        vals = {}
        for line in text.splitlines():
            m = re.match(r"^(vmmpower_[a-z_]+) ([0-9.e+-]+)$", line)
            if m:
                vals[m.group(1)] = float(m.group(2))
        return vals

    def plan_cpus(self):
        """{vcpu index: pCPU} of the fake VM in the current plan (None before the first plan)."""
        rc, text, err = self.d.ctl("plan", "--json")
        self.assertEqual(rc, 0, err)
        plan = json.loads(text)
        out = {}
        for v in plan.get("vcpus") or []:
            if v.get("pid") == PID:
                out[v["vcpu"]] = v["cpu"]
        return out if len(out) == N_VCPUS else None

    def daemon_online(self):
        rc, text, err = self.d.ctl("cpus", "--json")
        self.assertEqual(rc, 0, err)
        cpus = json.loads(text)["cpus"]
        return {c["cpu"] for c in cpus if c.get("online")}

    def wait_plan(self, pred, what, timeout=10):
        box = {}

        def check():
            p = self.plan_cpus()
            box["plan"] = p
            return p is not None and pred(p)
        try:
            self.d.wait_for(check, timeout, what)
        except DaemonError as e:
            raise AssertionError("plan {vcpu: pcpu}: %r\n%s" % (box.get("plan"), e)) from None
        return box["plan"]

    # -- the tests --

    def test_offline_and_back(self):
        self.start()
        # the VM tracked, busy enough to need several pCPUs
        plan = self.wait_plan(lambda p: len(set(p.values())) >= 2, "a plan of the busy VM on >= 2 pCPUs", 20)
        used = sorted(set(plan.values()))
        m = self.metrics()
        self.assertEqual(m.get("vmmpower_topology_changes_total"), 0)
        self.assertEqual(m.get("vmmpower_cpus_online"), self.n_cpus)
        log("first plan: vCPUs on pCPUs %s" % plan)

        # 1. the pCPUs the plan uses go offline; the vCPU threads still say they last ran there
        for i, tid in enumerate(self.vm.tids):
            self.vm.set_thread_cpu(tid, plan[i])
        t0 = time.monotonic()
        self.set_online(used, False)
        plan = self.wait_plan(lambda p: not set(p.values()) & set(used),
                              "a plan with no vCPU on the offline pCPUs %s" % used, 6)
        log("pCPUs %s offline: re-planned within %.2fs: %s" % (used, time.monotonic() - t0, plan))
        self.assertTrue(set(plan.values()) <= self.online, plan)
        self.assertEqual(self.daemon_online(), self.online)
        m = self.metrics()
        self.assertEqual(m.get("vmmpower_topology_changes_total"), 1)
        self.assertEqual(m.get("vmmpower_topology_errors_total"), 0)
        self.assertEqual(m.get("vmmpower_cpus_online"), self.n_cpus - len(used))
        line = re.search(r"^.*Online CPUs changed from 0-31 to %s: host topology read again.*$" %
                         re.escape(fmt_list(self.online)), self.d.log(), re.M)
        self.assertIsNotNone(line, self.d.log())
        log("daemon: %s" % line.group(0))
        # and it stays so: later plans too (and no further change is seen)
        self.d.wait_periods(4)
        plan = self.plan_cpus()
        self.assertFalse(set(plan.values()) & set(used), plan)
        self.assertEqual(self.metrics().get("vmmpower_topology_changes_total"), 1)

        # 2. back online: the topology has all 32 again
        self.set_online(used, True)
        self.d.wait_for(lambda: self.metrics().get("vmmpower_topology_changes_total") == 2, 6, "the CPUs back")
        self.assertEqual(self.daemon_online(), set(range(self.n_cpus)))
        self.assertEqual(self.metrics().get("vmmpower_cpus_online"), self.n_cpus)
        st = self.d.status()
        self.assertEqual((st["topology_changes"], st["topology_errors"]), (2, 0))
        self.assertRegex(self.d.log(), r"Online CPUs changed from %s to 0-31" % re.escape(fmt_list(set(range(
            self.n_cpus)) - set(used))))
        plan = self.wait_plan(lambda p: True, "a plan after the CPUs came back")
        log("pCPUs %s back online: plan %s" % (used, plan))

    def test_unreadable_online_keeps_running(self):
        self.start()
        self.wait_plan(lambda p: True, "a first plan", 20)
        before = self.d.status()["periods"]
        FakeVm.write(self.cpu_path("online"), "0-31,garbage\n")
        self.d.wait_for(lambda: self.metrics().get("vmmpower_topology_errors_total", 0) >= 3, 6,
                        "failed checks counted")
        m = self.metrics()
        self.assertEqual(m.get("vmmpower_topology_changes_total"), 0)
        self.assertEqual(m.get("vmmpower_cpus_online"), self.n_cpus)
        self.assertEqual(self.d.log().count("Failed to read the online CPUs"), 1)  # once a streak
        self.assertIsNotNone(self.plan_cpus())
        self.assertGreater(self.d.status()["periods"], before)
        self.assertGreaterEqual(self.d.status()["topology_errors"], 3)
        self.assertEqual(self.metrics().get("vmmpower_topology_stale"), 1)
        # fixed again: back to normal, no change taken (the set is the one the topology has)
        FakeVm.write(self.cpu_path("online"), "0-31\n")
        self.d.wait_for(lambda: "as the running topology has them" in self.d.log(), 10, "the check recovering")
        self.assertEqual(self.metrics().get("vmmpower_topology_changes_total"), 0)

        # a change whose topology cannot be read (a file that does not parse): kept, counted, retried
        errors = self.metrics()["vmmpower_topology_errors_total"]
        core_id = self.cpu_path("cpu7", "topology", "core_id")
        with open(core_id) as f:
            good = f.read()
        FakeVm.write(core_id, "seven\n")
        self.set_online([31], False)
        self.d.wait_for(lambda: self.metrics()["vmmpower_topology_errors_total"] >= errors + 3, 6,
                        "failed re-reads counted")
        self.assertEqual(self.metrics().get("vmmpower_topology_changes_total"), 0)
        self.assertEqual(self.daemon_online(), set(range(self.n_cpus)))  # the old topology, still whole
        self.assertEqual(self.d.log().count("but the host topology could not be read again"), 1)
        self.assertIsNotNone(self.plan_cpus())
        FakeVm.write(core_id, good)  # readable again: taken at the next try (a backoff of 2^n periods)
        self.d.wait_for(lambda: self.metrics().get("vmmpower_topology_changes_total") == 1, 10, "the change taken")
        self.assertEqual(self.metrics().get("vmmpower_topology_stale"), 0)
        self.assertEqual(self.daemon_online(), self.online)
        self.wait_plan(lambda p: 31 not in p.values(), "a plan without pCPU 31")

    def knobs(self):
        """The knobs the applier may write in the tree: cpufreq limits, PM QoS, cpuidle disable."""
        out = {}
        for dirpath, _, files in os.walk(self.cpu_path()):
            for f in files:
                if f in ("scaling_max_freq", "scaling_min_freq", "pm_qos_resume_latency_us", "disable",
                         "energy_performance_preference"):
                    path = os.path.join(dirpath, f)
                    with open(path) as fh:
                        out[os.path.relpath(path, self.sys)] = fh.read()
        return out

    def test_applier_survives_and_restores(self):
        """Plans applied (sysfs power driver on the tree; the vCPU pins go to thread ids no process
        has and fail): a CPU set going offline and back is taken as with --dry-run, and at exit the
        journal puts every knob of the tree back as it was."""
        before = self.knobs()
        self.start(dry_run=False)
        plan = self.wait_plan(lambda p: len(set(p.values())) >= 2, "a plan of the busy VM on >= 2 pCPUs", 20)
        used = sorted(set(plan.values()))
        self.d.wait_for(lambda: self.d.status()["apply"].get("passes", 0) >= 1, 10, "an applier pass")
        self.set_online(used, False)
        plan = self.wait_plan(lambda p: not set(p.values()) & set(used),
                              "a plan with no vCPU on the offline pCPUs %s" % used, 6)
        self.d.wait_periods(3)
        # their policies left out: the applier's driver knows them and keeps running
        restart = "The applier's power driver was made for the old CPUs"
        self.assertEqual(self.d.log().count(restart), 0, self.d.log())
        self.set_online(used, True)
        self.d.wait_for(lambda: self.metrics().get("vmmpower_topology_changes_total") == 2, 6, "the CPUs back")
        self.d.wait_periods(3)
        # back, they are policies the topology did not have: the applier is made again (journal
        # restored first), so that a policy it never knew is driven too
        self.assertEqual(self.d.log().count(restart), 1, self.d.log())
        m = self.metrics()
        self.assertEqual(m.get("vmmpower_topology_errors_total"), 0)
        self.assertEqual(m.get("vmmpower_plans_applied"), 1)
        apply = self.d.status()["apply"]
        self.assertGreater(apply["knob_changes"], 0, apply)  # the restore below has something to put back
        self.assertNotEqual(self.knobs(), before)
        self.assertEqual(self.d.stop(), 0, self.d.log())
        after = self.knobs()
        self.assertEqual({k: v for k, v in after.items() if before.get(k) != v}, {}, self.d.log())
        log("applier: %d knob changes through offline and back; every knob restored at exit" % apply["knob_changes"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
