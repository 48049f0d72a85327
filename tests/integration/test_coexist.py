#!/usr/bin/env python3
"""Coexistence with other tuners (issue 17 item 2), with the real daemon binary against a copy
of the small-2cpu fixture sysfs tree (SysfsRoot; no libvirt, no /proc scan for QEMU: nothing
of the host's knobs nor any other engineer's VM is touched):

  - the unit: Conflicts= and After= name tuned, power-profiles-daemon, intel_lpmd and
    cpupower; `systemd-analyze verify` of it passes with no warning;
  - a knob set by someone else before the start (policy1's scaling_max_freq lowered):
    OtherTuners=coexist leaves it exactly as found while policy0 is capped (and restored);
    OtherTuners=refuse does not start, naming the knob;
  - a running tuner: the stand-in is a copy of sleep(1) named `tuned` (its comm is "tuned",
    as the real python-run tuned's is; the Debian package cannot run here without dbus and
    systemd).  refuse: no start, the log names "tuned (pid N)"; coexist: starts, names it,
    writes no cpufreq knob at all; a tuner appearing before a reload: the applier puts our
    caps back and writes no more; with refuse the reload fails naming it.

Run: meson test -C build --suite integration coexist -v"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from daemonlib import Daemon, DaemonError  # noqa: E402

SOURCE_DIR = os.environ.get("VMMPOWER_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
DATA = os.environ.get("VMMPOWER_TEST_DATA") or os.path.join(os.path.dirname(HERE), "data")
FIXTURE = os.path.join(DATA, "sysfs-cpufreq", "small-2cpu", "sys")
UNIT = os.path.join(SOURCE_DIR, "config", "vmmpowerd.service")
POL = "devices/system/cpu/cpufreq/policy%d/scaling_max_freq"
TUNERS = {"tuned.service", "power-profiles-daemon.service", "intel_lpmd.service", "cpupower.service"}


def log(msg):
    print("[coexist] " + msg, flush=True)


def unit_values(key):
    vals = []
    with open(UNIT) as f:
        for line in f:
            if line.startswith(key + "="):
                vals += line.split("=", 1)[1].split()
    return vals


class Unit(unittest.TestCase):
    def test_conflicts_and_verify(self):
        self.assertEqual(set(unit_values("Conflicts")), TUNERS)
        self.assertTrue(TUNERS <= set(unit_values("After")), unit_values("After"))
        self.assertNotIn("thermald.service", unit_values("Conflicts"))
        tmp = tempfile.mkdtemp(prefix="vmmpt-coexist-unit-")
        self.addCleanup(shutil.rmtree, tmp, True)
        # verify checks that ExecStart= binaries exist: point them at installed ones.
        with open(UNIT) as f:
            text = f.read().replace("/usr/sbin/vmmpowerd", "/bin/true").replace("/usr/bin/vmmpowerctl", "/bin/true")
        path = os.path.join(tmp, "vmmpowerd.service")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run(["systemd-analyze", "verify", "--man=no", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
        log("systemd-analyze verify: rc %d, %r" % (p.returncode, p.stdout + p.stderr))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual((p.stdout + p.stderr).strip(), "")


class Coexist(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.fail("needs root")
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.tmp = tempfile.mkdtemp(prefix="vmmpt-%d-coexist-" % os.getpid(), dir=base)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.root = os.path.join(self.tmp, "sys")
        shutil.copytree(FIXTURE, self.root)

    def daemon(self, mode):
        d = Daemon(sections={"Daemon": {"ControlPeriod": "200ms", "SysfsRoot": self.root},
                             "Libvirt": {"Enabled": "no"},
                             "QEMU": {"ProcScan": "no"},
                             "Host": {"OtherTuners": mode}})
        self.addCleanup(shutil.rmtree, d.tmp, True)
        return d

    def knob(self, cpu):
        with open(os.path.join(self.root, POL % cpu)) as f:
            return f.read().strip()

    def put(self, cpu, value):
        with open(os.path.join(self.root, POL % cpu), "w") as f:
            f.write(value + "\n")

    def start_tuned(self):
        """A process whose comm is "tuned": sleep(1) copied under that name."""
        exe = os.path.join(self.tmp, "tuned")
        shutil.copy("/bin/sleep", exe)
        p = subprocess.Popen([exe, "600"])
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        comm = ""
        for _ in range(100):  # until the child has exec()ed
            with open("/proc/%d/comm" % p.pid) as f:
                comm = f.read().strip()
            if comm == "tuned":
                break
            time.sleep(0.05)
        self.assertEqual(comm, "tuned")
        return p

    def expect_refusal(self, d):
        with self.assertRaises(DaemonError):
            d.start()
        self.assertEqual(d.proc.returncode, 1)
        d.logf.close()
        return d.log()

    def test_knob_set_before_start(self):
        self.put(1, "2000000")  # the operator's cap on policy1
        text = self.expect_refusal(self.daemon("refuse"))
        self.assertIn("%s/%s holds \"2000000\", not its default (cpuinfo_max_freq): set by someone else; "
                      "OtherTuners=refuse." % (self.root, POL % 1), text)
        self.assertIn("Refusing to run beside another tuner", text)
        self.assertEqual((self.knob(0), self.knob(1)), ("3800000", "2000000"))

        d = self.daemon("coexist").start()
        self.addCleanup(d.stop)
        d.wait_for(lambda: self.knob(0) != "3800000", 15, "policy0 capped")
        d.wait_periods(10)
        self.assertEqual(self.knob(1), "2000000", "the operator's cap was overwritten")
        st = d.status()
        self.assertEqual(st["coexist"]["mode"], "coexist")
        self.assertEqual([k["path"] for k in st["coexist"]["knobs_set_by_others"]], [POL % 1])
        self.assertEqual(st["knobs"]["foreign"], 1)
        rc, out, _ = d.ctl("status")
        self.assertIn("other tuners:  coexist, none running; 1 knob(s) set by others at start, left to them", out)
        rc, out, _ = d.ctl("metrics")
        self.assertIn("vmmpower_apply_knobs_foreign_total 1", out)
        log("coexist: policy0 capped to %s kHz, policy1 left at the operator's 2000000 over %d periods" %
            (self.knob(0), st["periods"]))
        self.assertEqual(d.stop(), 0)
        self.assertEqual((self.knob(0), self.knob(1)), ("3800000", "2000000"))

    def test_tuned_running(self):
        tuned = self.start_tuned()
        text = self.expect_refusal(self.daemon("refuse"))
        self.assertIn("Another tuner is running: tuned (pid %d); OtherTuners=refuse." % tuned.pid, text)

        d = self.daemon("coexist").start()
        self.addCleanup(d.stop)
        d.wait_periods(15)
        self.assertIn("Another tuner is running: tuned (pid %d); leaving it these knobs: cpufreq, cpuidle, "
                      "pm_qos." % tuned.pid, d.log())
        st = d.status()
        self.assertIn({"name": "tuned", "pid": tuned.pid}, st["coexist"]["tuners"])
        self.assertEqual((self.knob(0), self.knob(1)), ("3800000", "3800000"), "wrote a tuned-owned knob")
        self.assertGreater(st["knobs"]["foreign_refused"], 0)
        self.assertEqual(st["knobs"]["changes"], 0)
        rc, out, _ = d.ctl("status")
        self.assertIn("other tuners:  coexist; running: tuned (pid %d)" % tuned.pid, out)
        log("tuned stand-in pid %d: %d planned writes refused in %d periods, 0 made" %
            (tuned.pid, st["knobs"]["foreign_refused"], st["periods"]))
        self.assertEqual(d.stop(), 0)

    def test_tuner_appears_before_reload(self):
        d = self.daemon("coexist").start()
        self.addCleanup(d.stop)
        d.wait_for(lambda: self.knob(0) != "3800000" and self.knob(1) != "3800000", 15, "caps applied")
        caps = (self.knob(0), self.knob(1))
        tuned = self.start_tuned()
        rc, out, err = d.ctl("reload")
        self.assertEqual(rc, 0, err)
        d.wait_for(lambda: (self.knob(0), self.knob(1)) == ("3800000", "3800000"), 15, "our caps put back")
        d.wait_periods(10)
        self.assertEqual((self.knob(0), self.knob(1)), ("3800000", "3800000"))
        self.assertIn({"name": "tuned", "pid": tuned.pid}, d.status()["coexist"]["tuners"])
        log("reload with a tuner: caps %s put back, none written in 10 periods after" % (caps,))

        # refuse at reload: fails naming it, the daemon keeps running as it was
        with open(d.config) as f:
            conf = f.read().replace("OtherTuners = coexist", "OtherTuners = refuse")
        with open(d.config, "w") as f:
            f.write(conf)
        rc, out, err = d.ctl("reload")
        self.assertNotEqual(rc, 0)
        self.assertIn("Another tuner is running: tuned (pid %d); OtherTuners=refuse." % tuned.pid, d.log())
        self.assertEqual(d.status()["reload_errors"], 1)
        self.assertEqual(d.status()["coexist"]["mode"], "coexist")
        self.assertEqual(d.stop(), 0)


PIN_TUNE = "<cputune><vcpupin vcpu='0' cpuset='0-1'/><emulatorpin cpuset='0-1'/></cputune>"


def operator_pin(xml):
    return xml.replace("</vcpu>", "</vcpu>\n  " + PIN_TUNE, 1)


class OperatorPins(unittest.TestCase):
    """Three TCG guests under the real libvirtd: `opin` whose persistent XML pins its vCPU and
    emulator to 0-1 (the operator's pin: on this 2-CPU host a set that no pin of vmmpower's
    equals with PinSingleCPU=yes), and two idle neighbours.  The neighbours are pinned by vmmpower (one pCPU
    each) while opin's threads keep exactly 0-1; `manage-pins="yes"` in opin's metadata lets vmmpower pin it too.

    Whether the two neighbours share a pCPU is not asserted: with opin's vCPU free to run on both CPUs, every
    placement of two 0.3% guests is within a few mW in the model, so which pCPU each gets follows where the
    kernel ran them at the first plan (a CI run found them apart for 180 s, another together at once).
    It is logged."""

    @classmethod
    def setUpClass(cls):
        import vmlib
        cls.vmlib = vmlib
        vmlib.require_root()
        vmlib.ensure_libvirtd()
        vmlib.ensure_guest_image()
        cls.guests = []
        cls.d = None
        cls.pinned = vmlib.define_and_start_domain("opin", 1, xml_filter=operator_pin)
        cls.guests.append(cls.pinned)
        cls.guests += [vmlib.define_and_start_domain("onb-a", 1), vmlib.define_and_start_domain("onb-b", 1)]
        for g in cls.guests:
            log("%s booted in %.1fs" % (g.name, g.wait_booted(240)))

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.stop()
            shutil.rmtree(cls.d.tmp, True)
        for g in getattr(cls, "guests", []):
            g.destroy()

    def affinity(self, g, tid):
        with open("/proc/%d/task/%d/status" % (g.pid, tid)) as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split(":", 1)[1].strip()
        return None

    def threads(self, g):
        return list(g.vcpu_tids().values()) + [g.pid]  # vCPU threads and the emulator (main) thread

    def neighbour_affinities(self):
        return [self.affinity(g, t) for g in self.guests[1:] for t in g.vcpu_tids().values()]

    def neighbours_pinned(self):
        """Every neighbour vCPU pinned by vmmpower: PinSingleCPU=yes gives each one pCPU."""
        affs = self.neighbour_affinities()
        return len(affs) == 2 and all(a and "-" not in a and "," not in a for a in affs)

    def neighbours_packed(self):
        affs = self.neighbour_affinities()
        return self.neighbours_pinned() and len(set(affs)) == 1

    def apply_stat(self, d, key):
        return d.status()["apply"][key]

    def metric(self, d, name):
        with open(d.metrics) as f:
            for line in f:
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return None

    def full_log(self, d):
        with open(d.log_path, errors="replace") as f:
            return f.read()

    def single(self, g, tid):
        a = self.affinity(g, tid)
        return a if a and "-" not in a and "," not in a else None

    def steady(self, d, periods=4):
        """Wait until the applier has made no pin for `periods` periods (the plan settled)."""
        def quiet():
            pins, p0 = self.apply_stat(d, "pins"), d.status()["periods"]
            while d.status()["periods"] < p0 + periods:
                time.sleep(0.25)
            return self.apply_stat(d, "pins") == pins
        d.wait_for(quiet, 60, "no pin made for %d periods" % periods)

    def test_live_pin_changes(self):
        """Pins changed behind vmmpower's back on VMs it manages.  A plain QEMU's vCPU thread widened to both
        CPUs with taskset, as the kernel leaves a thread whose CPU went offline, is pinned again (a libvirt
        vCPU thread cannot be widened so: its cgroup's cpuset holds the pin; `taskset -p -c 0-1` leaves it
        on its CPU).  onb-a's vCPU pinned to the other CPU with `virsh vcpupin --live` is the operator's: not
        pinned again over 8 periods, shown by `vmmpowerctl vms`, counted; set back to both CPUs, vmmpower
        pins it again.  Pinned by hand again, both the libvirt and the plain QEMU vCPU keep the operator's
        pin through a reload, when vmmpowerd exits, under a new vmmpowerd on the same state directory
        (a restart: foreign-pins) and when that one exits.  The plain QEMU (2 vCPUs) keeps its emulator
        thread with its vCPU 1, which vmmpower still places."""
        from test_packing import core_model
        vmlib = self.vmlib
        g = self.guests[1]
        tid = list(g.vcpu_tids().values())[0]
        self.addCleanup(vmlib.virsh, "vcpupin", g.name, "0", "0-1", "--live")
        q = vmlib.start_plain_qemu("onb-q", 2, qmp=False, test=self)
        model = core_model(os.path.join(SOURCE_DIR, "config", "models", "xeon-spr-2s.model"))
        self.addCleanup(os.unlink, model)
        d = self.__class__.d = Daemon(sections={"Planner": {"ShrinkDwell": "2s", "ModelFile": model,
                                                            "Profile": "batch",
                                                            "PinSingleCPU": "yes"}}).start()
        d.wait_for(lambda: len(q.vcpu_tids()) == 2, 60, "onb-q's vCPU threads")
        qtid, qtid1 = q.vcpu_tids()[0], q.vcpu_tids()[1]
        d.wait_for(lambda: self.single(g, tid) and self.single(q, qtid), 180, "both vCPUs pinned by vmmpower")
        self.steady(d)

        # 1. widened (what the kernel does on an offline flap; no CPU can go offline in a test)
        t0 = time.monotonic()
        subprocess.run(["taskset", "-p", "-c", "0-1", str(qtid)], check=True, stdout=subprocess.DEVNULL)
        self.assertEqual(self.affinity(q, qtid), "0-1")
        d.wait_for(lambda: self.apply_stat(d, "pin_widened") >= 1 and self.single(q, qtid), 20,
                   "the widened pin made again")
        log("widened pin of tid %d made again (CPU %s) %.1fs later" % (qtid, self.single(q, qtid),
                                                                       time.monotonic() - t0))
        self.assertEqual(self.apply_stat(d, "pin_foreign"), 0)
        self.assertIn("pinned thread(s) found running on more CPUs than pinned", self.full_log(d))

        # 2. the operator pins onb-a's vCPU elsewhere: theirs
        self.steady(d)
        other = "1" if self.single(g, tid) == "0" else "0"
        vmlib.virsh("vcpupin", g.name, "0", other, "--live")
        d.wait_for(lambda: self.apply_stat(d, "pins_foreign") == 1, 30, "the operator's pin seen at two checks")
        d.wait_for(lambda: (d.vm_by_pid(g.pid) or {}).get("policy", {}).get("pinned_by_others") == [0], 10,
                   "vmmpowerctl vms --json: vCPU 0 pinned by others")
        self.assertIn("vCPU 0 pinned by someone else since vmmpower pinned it", d.ctl("vms")[1])
        self.assertIn("pinned by someone else, leaving it to them", self.full_log(d))
        d.wait_periods(1)
        self.assertEqual(self.metric(d, "vmmpower_apply_pins_foreign"), 1)
        p0 = d.status()["periods"]
        while d.status()["periods"] < p0 + 8:
            self.assertEqual(self.affinity(g, tid), other)
            time.sleep(0.25)
        self.assertEqual(self.apply_stat(d, "pin_foreign"), 1)

        # 3. set back to every CPU: vmmpower's again
        vmlib.virsh("vcpupin", g.name, "0", "0-1", "--live")
        d.wait_for(lambda: self.apply_stat(d, "pin_handed_back") == 1 and self.single(g, tid), 30,
                   "handed back and pinned by vmmpower again")
        self.assertEqual(self.apply_stat(d, "pins_foreign"), 0)
        log("handed back: tid %d pinned to %s" % (tid, self.single(g, tid)))

        # 4. both pinned by hand; the exit restores everything else and leaves their pins
        self.steady(d)
        other = "1" if self.single(g, tid) == "0" else "0"
        qother = "1" if self.single(q, qtid) == "0" else "0"
        vmlib.virsh("vcpupin", g.name, "0", other, "--live")
        subprocess.run(["taskset", "-p", "-c", qother, str(qtid)], check=True, stdout=subprocess.DEVNULL)
        d.wait_for(lambda: self.apply_stat(d, "pins_foreign") == 2, 30, "both hand pins seen at two checks")
        self.assertEqual(self.apply_stat(d, "pin_foreign"), 3)
        # onb-q's emulator (its main thread) follows its vCPU 1, still vmmpower's, not the one left
        # to the operator (it was let go with vCPU 0 before)
        d.wait_periods(2)
        self.assertIsNotNone(self.single(q, qtid1))
        self.assertEqual(self.affinity(q, q.pid), self.single(q, qtid1))
        # a reload (same applier settings: the applier and what it knows stay) leaves them
        rc, out, err = d.ctl("reload")
        self.assertEqual(rc, 0, err)
        self.hand_pins_kept(d, g, tid, other, q, qtid, qother)
        self.assertEqual(d.stop(), 0)
        self.addCleanup(shutil.rmtree, d.tmp, True)
        self.__class__.d = None
        self.assertEqual((self.affinity(g, tid), self.affinity(q, qtid)), (other, qother))
        self.assertEqual(vmlib.virsh("vcpupin", g.name).stdout.split()[-1], other)

        # 5. a new vmmpowerd on the same state directory (a restart) reads the pins left to others
        # (foreign-pins) and leaves them too; its exit leaves them again
        state = os.path.join(d.tmp, "state")
        self.assertTrue(os.path.exists(os.path.join(state, "foreign-pins")))
        d2 = self.__class__.d = Daemon(sections={"Daemon": {"StateDirectory": state},
                                                 "Planner": {"ShrinkDwell": "2s", "ModelFile": model,
                                                             "Profile": "batch", "PinSingleCPU": "yes"}}).start()
        d2.wait_for(lambda: "2 vCPU thread(s) pinned by someone else under an earlier run: left to them"
                    in self.full_log(d2), 15, "the restart's applier reading foreign-pins")
        self.hand_pins_kept(d2, g, tid, other, q, qtid, qother)
        self.assertEqual(d2.stop(), 0)
        self.addCleanup(shutil.rmtree, d2.tmp, True)
        self.__class__.d = None
        self.assertEqual((self.affinity(g, tid), self.affinity(q, qtid)), (other, qother))

    def hand_pins_kept(self, d, g, tid, other, q, qtid, qother):
        """Both hand pins left to the operator over 6 periods, and counted."""
        d.wait_for(lambda: self.apply_stat(d, "pins_foreign") == 2, 30, "both hand pins left to the operator")
        p0 = d.status()["periods"]
        while d.status()["periods"] < p0 + 6:
            self.assertEqual((self.affinity(g, tid), self.affinity(q, qtid)), (other, qother))
            time.sleep(0.25)
        self.assertEqual(self.apply_stat(d, "pins_foreign"), 2)

    def test_pins_left_alone_then_managed(self):
        from test_packing import core_model
        vmlib = self.vmlib
        g = self.pinned
        live = vmlib.virsh("dumpxml", g.name).stdout
        inactive = vmlib.virsh("dumpxml", "--inactive", g.name).stdout
        self.assertIn("<vcpupin vcpu='0' cpuset='0-1'/>", inactive)
        self.assertIn("<vcpupin vcpu='0' cpuset='0-1'/>", live)
        before = {t: self.affinity(g, t) for t in self.threads(g)}
        self.assertEqual(set(before.values()), {"0-1"})
        model = core_model(os.path.join(SOURCE_DIR, "config", "models", "xeon-spr-2s.model"))
        self.addCleanup(os.unlink, model)
        # PinSingleCPU: every vCPU vmmpower places gets one pCPU, so "pinned by vmmpower" shows
        # in the affinity even when the plan keeps both pCPUs active.
        d = self.__class__.d = Daemon(sections={"Planner": {"ShrinkDwell": "2s", "ModelFile": model,
                                                            "Profile": "batch",
                                                            "PinSingleCPU": "yes"}}).start()
        t0 = time.monotonic()
        d.wait_for(self.neighbours_pinned, 180, "the two neighbours pinned by vmmpower")
        log("neighbours pinned %.1fs after start: %s" % (time.monotonic() - t0, self.neighbour_affinities()))
        d.wait_for(lambda: d.vm_by_pid(g.pid), 30, "opin tracked")
        vm = d.vm_by_pid(g.pid)
        pol = vm["policy"]
        self.assertEqual(pol["placement"], "exclude")
        self.assertTrue(pol["pins_left_alone"])
        self.assertEqual(pol["operator_pins"], "vcpupin, emulatorpin")
        rc, out, _ = d.ctl("vms")
        self.assertIn("placement: exclude: pinned by the operator (vcpupin, emulatorpin in the persistent XML)", out)
        self.assertIn("the operator pinned it (<cputune>/<vcpu>: vcpupin, emulatorpin)", d.log())
        # Every sample, for 15 periods and until 3 samples found the neighbours pinned by vmmpower
        # (at most 90 periods): the operator's pin exactly.
        samples = pinned = packed = 0
        p0 = d.status()["periods"]
        while True:
            periods = d.status()["periods"] - p0
            if (periods >= 15 and pinned >= 3) or periods >= 90:
                break
            self.assertEqual({t: self.affinity(g, t) for t in self.threads(g)}, before)
            samples += 1
            pinned += self.neighbours_pinned()
            packed += self.neighbours_packed()
            time.sleep(0.25)
        self.assertGreater(pinned, 0, "the neighbours were never pinned by vmmpower while sampled")
        self.assertIn("<vcpupin vcpu='0' cpuset='0-1'/>", vmlib.virsh("dumpxml", g.name).stdout)
        self.assertEqual(vmlib.virsh("vcpupin", g.name).stdout.split()[-1], "0-1")
        plan = d.json("plan")
        log("opin kept 0-1 in %d samples over %d periods; neighbours pinned in %d of them, on one pCPU in %d; "
            "plan: %d active, %s" % (samples, periods, pinned, packed, plan["n_active"], plan["reason"]))

        # Opt in: vmmpower may now pin it.
        vmlib.virsh("metadata", g.name, "--uri", "https://vmmpower.org/xmlns/policy/1", "--key", "vmmpower",
                    "--set", '<policy><placement manage-pins="yes"/></policy>')
        t1 = time.monotonic()
        d.wait_for(lambda: (d.vm_by_pid(g.pid) or {}).get("policy", {}).get("placement") == "pack", 15,
                   "opin managed after manage-pins=yes")
        d.wait_for(lambda: all("-" not in (self.affinity(g, t) or "-") for t in g.vcpu_tids().values()), 60,
                   "opin's vCPU pinned by vmmpower")
        log("manage-pins=yes: opin's vCPU pinned to %s %.1fs later" %
            (self.affinity(g, list(g.vcpu_tids().values())[0]), time.monotonic() - t1))
        self.assertIn("manage-pins=yes", d.ctl("vms")[1])
        self.assertEqual(d.stop(), 0)
        self.addCleanup(shutil.rmtree, d.tmp, True)
        self.__class__.d = None
        # vmmpower's pins are live only and put back on exit; the operator's definition is untouched.
        self.assertIn("<vcpupin vcpu='0' cpuset='0-1'/>", vmlib.virsh("dumpxml", "--inactive", g.name).stdout)
        self.assertEqual({t: self.affinity(g, t) for t in self.threads(g)}, before)


if __name__ == "__main__":
    unittest.main(verbosity=2)
