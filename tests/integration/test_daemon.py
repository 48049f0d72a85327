#!/usr/bin/env python3
"""vmmpowerd end to end: the real daemon binary, a real libvirtd, two libvirt TCG guests and
one plain QEMU guest. Discovery (every vCPU thread with its VM and index, each VM once),
load tracking (busy vs idle vCPU), metrics, a destroyed VM leaving within one period,
libvirtd restarted under the running daemon, and the daemon's handling of bad input
(config, control socket, unreachable libvirtd, unprivileged peers). Must run as root."""

import glob
import grp
import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmlib  # noqa: E402
from daemonlib import Daemon, VMMPOWERD  # noqa: E402

BUSY_MIN = 0.80
IDLE_MAX = 0.20
PERIOD_S = 1.0


def log(msg):
    print("[daemon] " + msg, flush=True)


def vcpu_map(vm):
    return {v["index"]: v["tid"] for v in vm["vcpus"]}


class DaemonWithGuests(unittest.TestCase):
    """Tests share the guests and the daemon; they run in name order (test_1_..., ...)."""

    @classmethod
    def setUpClass(cls):
        vmlib.require_root()
        vmlib.ensure_libvirtd()
        vmlib.ensure_guest_image()
        t0 = time.monotonic()
        cls.a = vmlib.define_and_start_domain("dmn-a", 2, busy=[0])
        cls.b = vmlib.define_and_start_domain("dmn-b", 1)
        cls.c = vmlib.start_plain_qemu("dmn-c", 1, qmp=True)
        for g in (cls.a, cls.b, cls.c):
            g.wait_booted(120)
        log("3 guests booted in %.1fs" % (time.monotonic() - t0))
        cls.d = Daemon({"QEMU": {"QMPSocket": cls.c.qmp_path}}).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop() if hasattr(cls, "d") else None
        for g in ("a", "b", "c"):
            if hasattr(cls, g):
                getattr(cls, g).destroy()
        if rc not in (None, 0):
            raise AssertionError("vmmpowerd exited with %r on SIGTERM" % rc)

    def test_1_every_vcpu_found_once(self):
        d = self.d
        d.wait_periods(3)  # a procfs scan and a libvirt snapshot have both landed
        vms = d.vms()
        pids = [vm["pid"] for vm in vms]
        for g, sources in ((self.a, {"libvirt", "proc"}), (self.b, {"libvirt", "proc"}),
                           (self.c, {"proc", "qmp"})):
            self.assertEqual(pids.count(g.pid), 1, "VM %s listed %d times" % (g.name, pids.count(g.pid)))
            vm = d.vm_by_pid(g.pid)
            self.assertEqual(vm["name"], g.name)
            self.assertEqual(set(vm["sources"]), sources, vm)
            self.assertEqual(vm["accel"], "tcg")
            self.assertEqual(vcpu_map(vm), g.vcpu_tids(), "vCPU index -> thread id of %s" % g.name)
        # On this kind of host the BPF task iterator loads: the fast sampler is the one in use.
        self.assertEqual(d.status()["tracker"]["sampler"], "bpf-iter")
        uuid = vmlib.virsh("domuuid", self.a.name).stdout.strip()
        self.assertEqual(d.vm_by_pid(self.a.pid)["uuid"], uuid)
        # The daemon's own text table names every VM too.
        rc, out, _ = d.ctl("vms")
        self.assertEqual(rc, 0)
        for g in (self.a, self.b, self.c):
            self.assertIn(g.name[:24], out)

    def _util(self, g):
        vm = self.d.vm_by_pid(g.pid)
        log("%s: %s" % (g.name, ", ".join("vCPU%d util %.3f wait %.3f" % (v["index"], v["util"], v["wait_ratio"])
                                           for v in vm["vcpus"])))
        return {v["index"]: v["util"] for v in vm["vcpus"]}

    def test_2_busy_vcpu_and_idle_vcpu(self):
        d = self.d
        d.wait_periods(2)
        u = self._util(self.a)
        log("guest a, vCPU0 busy: daemon util %s" % u)
        self.assertGreater(u[0], BUSY_MIN)
        self.assertLess(u[1], IDLE_MAX)
        # Move the load to vCPU1: the daemon follows within two periods.
        self.a.console.idle("all")
        self.a.console.busy(1)
        d.wait_periods(3)
        u = self._util(self.a)
        log("guest a, vCPU1 busy: daemon util %s" % u)
        self.assertLess(u[0], IDLE_MAX)
        self.assertGreater(u[1], BUSY_MIN)
        self.a.console.idle("all")
        d.wait_periods(2)
        u = self._util(self.a)
        self.assertLess(max(u.values()), IDLE_MAX, u)

    def test_3_metrics(self):
        d = self.d
        rc, out, _ = d.ctl("metrics")
        self.assertEqual(rc, 0)
        for g in (self.a, self.b, self.c):
            for idx in g.vcpu_tids():
                needle = 'vmmpower_vcpu_utilization_ratio{domain="%s",' % g.name
                lines = [l for l in out.splitlines() if l.startswith(needle) and 'vcpu="%d"' % idx in l]
                self.assertEqual(len(lines), 1, "metric for %s vCPU %d" % (g.name, idx))
                value = float(lines[0].rsplit(" ", 1)[1])
                self.assertTrue(0.0 <= value <= 1.0, lines[0])
        d.wait_periods(1)
        with open(d.metrics) as f:
            text = f.read()
        self.assertIn("# TYPE vmmpower_vcpu_utilization_ratio gauge", text)
        self.assertIn('vmmpower_vcpu_utilization_ratio{domain="%s"' % self.c.name, text)
        # One idle-state series per cpuidle state the host has, named as sysfs names it:
        # two on a haltpoll host, none where the cpuidle driver is "none" (no states).
        self.assertIn("# TYPE vmmpower_cpu_idle_state_seconds_total counter", text)
        counts = []
        for cpu in (0, 1):
            want = set()
            for st in glob.glob("/sys/devices/system/cpu/cpu%d/cpuidle/state[0-9]*/name" % cpu):
                with open(st) as f:
                    want.add(f.read().strip())
            got = set(re.findall(r'^vmmpower_cpu_idle_state_seconds_total\{cpu="%d",state="([^"]+)"\} [0-9.]+$' % cpu,
                                 text, re.M))
            self.assertEqual(got, want, "idle-state series of cpu %d" % cpu)
            counts.append(len(got))
        log("metrics: idle-state series for %s states on cpus 0, 1, as in sysfs" % counts)

    def test_3_plan_covers_every_vcpu(self):
        """The plan places every measured vCPU on an online pCPU, its best placement
        models no more power than spreading them, and it is applied (Apply=yes)."""
        d = self.d
        d.wait_periods(2)
        p = d.json("plan")
        self.assertTrue(p["enabled"])
        online = {c["cpu"] for c in d.json("cpus")["cpus"] if c["online"]}
        planned = {(v["pid"], v["vcpu"]): v["cpu"] for v in p["vcpus"]}
        for g in (self.a, self.b, self.c):
            for idx in g.vcpu_tids():
                self.assertIn((g.pid, idx), planned, "vCPU %d of %s not in the plan" % (idx, g.name))
                self.assertIn(planned[(g.pid, idx)], online)
        # The best placement found never models more than spread (the applied one may lag
        # behind it during the shrink dwell).
        self.assertLessEqual(p["target_mw"], p["spread_mw"] + 1e-6)
        active = {c["cpu"] for c in p["cpus"] if c["active"]}
        self.assertEqual(active, set(planned.values()))
        log("plan: %s, %d active pCPUs, %.0f mW vs spread %.0f mW" % (
            p["decision"], p["n_active"], p["plan_mw"], p["spread_mw"]))
        rc, out, _ = d.ctl("plan")
        self.assertEqual(rc, 0)
        self.assertIn("plan (applied)", out)
        self.assertFalse(p["advisory"])
        self.assertTrue(p["apply"]["enabled"])
        self.assertEqual(p["apply"]["pin_errors"], 0, p["apply"])

    def test_4_destroyed_vm_leaves_within_one_period(self):
        d = self.d
        self.assertIsNotNone(d.vm_by_pid(self.b.pid))
        t0 = time.monotonic()
        vmlib.virsh("destroy", self.b.name)
        waited = d.wait_for(lambda: d.vm_by_pid(self.b.pid) is None, 10, "destroyed VM to leave")
        elapsed = time.monotonic() - t0
        log("destroyed libvirt VM gone from vms %.2fs after virsh destroy returned" % waited)
        # One period, plus the 0.1 s polling step of wait_for.
        self.assertLessEqual(waited, PERIOD_S + 0.2, "took %.2fs (%.2fs incl. destroy)" % (waited, elapsed))

    def test_5_killed_plain_qemu_leaves_within_one_period(self):
        d = self.d
        removed0 = d.status()["tracker"]["vms_removed"]
        os.kill(self.c.pid, signal.SIGKILL)
        waited = d.wait_for(lambda: d.vm_by_pid(self.c.pid) is None, 10, "killed QEMU to leave")
        log("kill -9 of plain QEMU: gone from vms after %.2fs" % waited)
        self.assertLessEqual(waited, PERIOD_S + 0.2)
        # Whichever saw it first (ESRCH on the kept fds, or the procfs/QMP pass), the VM
        # was removed once.
        self.assertEqual(d.status()["tracker"]["vms_removed"], removed0 + 1)

    def test_6_libvirtd_restart_is_survived(self):
        d = self.d
        # Connected now (another test may have restarted libvirtd moments ago: the
        # reconnect backoff is at most 30 s).
        d.wait_for(lambda: d.status()["libvirt"]["connected"], 40, "a libvirt connection")
        connects = d.status()["libvirt"]["connects"]
        vmlib.restart_libvirtd(kill=True)
        waited = d.wait_for(lambda: d.status()["libvirt"]["connects"] > connects
                            and d.status()["libvirt"]["connected"], 60, "reconnect to libvirtd")
        log("reconnected to libvirtd %.1fs after the restart" % waited)
        st = d.status()
        self.assertGreaterEqual(st["libvirt"]["disconnects"], 1)
        # Reconciled: the running domain is still there, with its libvirt identity.
        vm = d.vm_by_pid(self.a.pid)
        self.assertIsNotNone(vm)
        self.assertIn("libvirt", vm["sources"])
        self.assertEqual(vcpu_map(vm), self.a.vcpu_tids())
        # And a domain started after the reconnect is found through libvirt's events.
        e = vmlib.define_and_start_domain("dmn-e", 1, test=self)
        d.wait_for(lambda: (d.vm_by_pid(e.pid) or {}).get("sources", []).count("libvirt") == 1,
                   15, "new domain after reconnect")


class DaemonBadInput(unittest.TestCase):
    """No guests needed: configuration, control socket, libvirt unreachable, credentials."""

    @classmethod
    def setUpClass(cls):
        vmlib.require_root()

    def start(self, sections=None, existing=None, **kw):
        d = existing or Daemon(sections, **kw)
        d.start()
        self.addCleanup(d.stop)
        return d

    def test_check_config(self):
        d = Daemon({"Daemon": {"ControlPeriod": "fast"}})
        p = subprocess.run([VMMPOWERD, "--check-config", "--config", d.config], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"%s:\d+: .*ControlPeriod" % d.config)
        d = Daemon()
        p = subprocess.run([VMMPOWERD, "--check-config", "--config", d.config], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        # A daemon started on a bad config refuses to start, with the same message.
        bad = Daemon({"Bogus": {"Key": "1"}})
        p = subprocess.run([VMMPOWERD, "--foreground", "--config", bad.config], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=10)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Bogus", p.stderr)

    def test_unreachable_libvirtd(self):
        d = self.start({"Libvirt": {"URI": "qemu:///system?socket=/nonexistent/libvirt-sock"}})
        d.wait_for(lambda: d.status()["libvirt"]["connect_failures"] >= 2, 15, "connect retries")
        st = d.status()
        self.assertFalse(st["libvirt"]["connected"])
        self.assertEqual(st["libvirt"]["connects"], 0)
        log("unreachable libvirtd: %d failed connects, daemon still serving" % st["libvirt"]["connect_failures"])

    def test_reload(self):
        d = self.start()
        good = open(d.config).read()
        with open(d.config, "a") as f:
            f.write("[Daemon]\nNoSuchKey = 1\n")
        d.signal(signal.SIGHUP)
        d.wait_for(lambda: d.status()["reload_errors"] == 1, 10, "failed SIGHUP reload")
        rc, _, err = d.ctl("reload")
        self.assertEqual(rc, 1)
        self.assertIn("EINVAL", err)
        self.assertEqual(d.status()["period_ms"], 1000)  # old configuration still running
        with open(d.config, "w") as f:
            f.write(good.replace("ControlPeriod = 1s", "ControlPeriod = 500ms"))
        rc, _, err = d.ctl("reload")
        self.assertEqual(rc, 0, err)
        self.assertEqual(d.status()["period_ms"], 500)
        d.wait_periods(3)

    def test_control_garbage(self):
        d = self.start()

        def raw(data):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(d.socket)
            s.sendall(data)
            out = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
            s.close()
            return out

        self.assertTrue(raw(b"x" * 5000).startswith(b"ERR E2BIG"))
        self.assertTrue(raw(b"status\x00junk\n").startswith(b"ERR EINVAL"))
        self.assertTrue(raw(b"\xff\xfe\n").startswith(b"ERR EINVAL"))
        self.assertTrue(raw(b"shutdown\n").startswith(b"ERR ENOENT"))
        self.assertTrue(raw(b"vms extra\n").startswith(b"ERR EINVAL"))
        # A client that connects and says nothing does not block others.
        idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        idle.connect(d.socket)
        self.assertTrue(raw(b"version\n").startswith(b"OK\n"))
        idle.close()
        st = d.status()
        self.assertGreaterEqual(st["control"]["errors"], 5)

    def test_credentials(self):
        nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
        d = self.start()
        rc, _, err = d.ctl("status", user=nobody)
        self.assertEqual(rc, 3, err)  # socket is 0600: cannot even connect
        try:
            gid = grp.getgrnam("vmmpt-ctl").gr_gid
        except KeyError:
            subprocess.run(["groupadd", "--system", "vmmpt-ctl"], check=True)
            gid = grp.getgrnam("vmmpt-ctl").gr_gid
        d2 = self.start({"Daemon": {"ControlGroup": "vmmpt-ctl"}})
        member = ["--reuid=65534", "--regid=65534", "--groups=%d" % gid]
        rc, out, err = d2.ctl("status", user=member)
        self.assertEqual(rc, 0, err)
        self.assertIn("vmmpowerd", out)
        rc, _, err = d2.ctl("reload", user=member)
        self.assertEqual(rc, 1)
        self.assertIn("EPERM", err)
        rc, _, err = d2.ctl("notify", "started", "x", user=member)
        self.assertEqual(rc, 1)
        self.assertIn("EPERM", err)
        rc, _, err = d2.ctl("status", user=nobody)
        self.assertNotEqual(rc, 0)
        self.assertEqual(d2.status()["control"]["denied"], 2)

    def test_runs_with_the_units_capabilities(self):
        """The capability bounding set and NoNewPrivileges of config/vmmpowerd.service are
        enough: start-up with a ControlGroup (chown of the socket), libvirt, /proc of QEMU."""
        unit = os.path.join(vmlib.SOURCE_DIR, "config", "vmmpowerd.service")
        caps = None
        with open(unit) as f:
            for line in f:
                if line.startswith("CapabilityBoundingSet="):
                    caps = line.split("=", 1)[1].split()
        self.assertTrue(caps, "no CapabilityBoundingSet in the unit")
        bset = "-all," + ",".join("+" + c[len("CAP_"):].lower() for c in caps)
        try:
            grp.getgrnam("vmmpt-ctl")
        except KeyError:
            subprocess.run(["groupadd", "--system", "vmmpt-ctl"], check=True)
        d = Daemon({"Daemon": {"ControlGroup": "vmmpt-ctl"}})
        wrapped = ["setpriv", "--bounding-set=" + bset, "--inh-caps=-all", "--no-new-privs", "--"]
        d.proc = None
        d.logf = open(d.log_path, "ab")
        d.proc = subprocess.Popen(wrapped + [VMMPOWERD, "--foreground", "--config", d.config],
                                  stdout=d.logf, stderr=d.logf, stdin=subprocess.DEVNULL)
        self.addCleanup(d.stop)
        d.wait_for(lambda: d.ctl("version")[0] == 0 or d.proc.poll() is not None, 15, "start-up")
        self.assertIsNone(d.proc.poll(), d.log())
        with open("/proc/%d/status" % d.proc.pid) as f:
            capeff = [l for l in f if l.startswith("CapEff:")][0]
        log("daemon under the unit's bounding set: %s" % capeff.strip())
        d.wait_for(lambda: d.status()["libvirt"]["connected"], 15, "libvirt connection")
        self.assertEqual(os.stat(d.socket).st_gid, grp.getgrnam("vmmpt-ctl").gr_gid)

    def _affinity(self, pid):
        return os.sched_getaffinity(pid)

    def test_restore_after_crash(self):
        """A knob changed through the journal by a process that then died (journal-writer
        exits without restoring, like kill -9) is put back by `vmmpowerd --restore`, left
        alone if someone else changed it since, and put back at start-up."""
        from daemonlib import BUILD_DIR
        writer = os.path.join(BUILD_DIR, "tests", "journal-writer")
        d = Daemon()
        state = os.path.join(d.tmp, "state")
        victim = subprocess.Popen(["sleep", "300"])
        self.addCleanup(victim.kill)
        pid = victim.pid
        every = self._affinity(pid)
        self.assertEqual(every, set(range(os.cpu_count())))

        def pin():
            subprocess.run([writer, state, "pin", str(pid), str(pid), "1"], check=True)
            self.assertEqual(self._affinity(pid), {1})
            self.assertTrue(os.listdir(state), "no journal written")

        def restore():
            return subprocess.run([VMMPOWERD, "--restore", "--config", d.config], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=30)

        pin()
        p = restore()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self._affinity(pid), every)
        self.assertIn("1 restored", p.stderr)
        self.assertEqual(os.listdir(state), [], "journal left after a complete restore")

        pin()
        os.sched_setaffinity(pid, {0})  # someone else's change
        p = restore()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self._affinity(pid), {0}, "restore overwrote someone else's change")
        self.assertIn("1 changed by someone else", p.stderr)

        os.sched_setaffinity(pid, every)
        pin()
        d.start()
        self.addCleanup(d.stop)
        self.assertEqual(self._affinity(pid), every, "not restored at start-up after a crash")
        self.assertIn("1 restored", d.log())

    def test_sd_notify_and_watchdog(self):
        """Type=notify without systemd: READY=1, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1."""
        d = Daemon({"Daemon": {"ControlPeriod": "5s"}, "QEMU": {"ProcScanInterval": "5s"}})
        path = os.path.join(d.tmp, "notify.sock")
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(path)
        ns.settimeout(5)
        env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="1000000")
        env.pop("WATCHDOG_PID", None)
        p = subprocess.Popen([VMMPOWERD, "--foreground", "--config", d.config], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            msgs = []
            t0 = time.monotonic()
            while time.monotonic() - t0 < 3.2:
                msgs.append(ns.recv(4096).decode())
            self.assertIn("READY=1", msgs[0])
            pings = [m for m in msgs if m == "WATCHDOG=1"]
            # 0.5 s interval over ~3 s, although the control period is 5 s.
            self.assertGreaterEqual(len(pings), 4, msgs)
        finally:
            p.terminate()
            self.assertEqual(p.wait(10), 0)
        rest = []
        try:
            while True:
                rest.append(ns.recv(4096).decode())
        except socket.timeout:
            pass
        self.assertIn("STOPPING=1", rest)
        ns.close()

    def _second(self, config, extra=()):
        """Start a vmmpowerd that must refuse to run: returns (rc, stderr); one still running
        after 15 s is stopped and the test fails."""
        p = subprocess.Popen([VMMPOWERD, "--foreground", "--config", config] + list(extra), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True)
        try:
            _, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.terminate()
            _, err = p.communicate(timeout=15)
            self.fail("a second daemon %r started and ran:\n%s" % (list(extra), err))
        return p.returncode, err

    def test_second_daemon_on_one_config(self):
        """One daemon per state directory, in every mode: a second one started on the same
        config (applying, --dry-run, --once) exits non-zero naming the first one's pid, before
        it touches the journal, the control socket or a hint channel; the first stays
        reachable on an unchanged socket. A daemon with another state directory but the same
        ControlSocket does not take the live socket over either; one with its own state
        directory and socket runs alongside."""
        a = self.start(args=["--dry-run"])
        sock_ino = os.stat(a.socket).st_ino
        for extra in ([], ["--dry-run"], ["--once"]):
            rc, err = self._second(a.config, extra)
            self.assertNotEqual(rc, 0, err)
            self.assertIn("Another vmmpowerd (pid %d) is running" % a.proc.pid, err)
            # it stopped at the lock: nothing restored, no socket bound, no libvirt (hint channels)
            self.assertEqual(err.strip().count("\n"), 0, err)
            self.assertIsNone(a.proc.poll())
            self.assertEqual(os.stat(a.socket).st_ino, sock_ino, "control socket replaced")
            rc, out, err = a.ctl("version")
            self.assertEqual(rc, 0, err)
        pidfile = os.path.join(a.tmp, "state", "vmmpowerd.pid")
        with open(pidfile) as f:
            self.assertEqual(int(f.read()), a.proc.pid)
        # Another state directory, the same control socket: refused, the socket stays A's.
        b = Daemon(args=["--dry-run"])
        with open(b.config) as f:
            conf = f.read()
        with open(b.config, "w") as f:
            f.write(conf.replace(b.socket, a.socket))
        rc, err = self._second(b.config, ["--dry-run"])
        self.assertNotEqual(rc, 0, err)
        self.assertIn("Control socket %s is served by another process (pid %d)" % (a.socket, a.proc.pid), err)
        self.assertEqual(os.stat(a.socket).st_ino, sock_ino, "control socket replaced")
        self.assertEqual(a.ctl("version")[0], 0)
        # Its own state directory and socket: both run.
        c = self.start(args=["--dry-run"])
        self.assertEqual(c.ctl("version")[0], 0)
        self.assertEqual(a.ctl("version")[0], 0)
        # A stopped daemon removes its socket and lock file; the next one starts.
        self.assertEqual(a.stop(), 0)
        self.assertFalse(os.path.exists(a.socket))
        self.assertFalse(os.path.exists(pidfile))
        a2 = self.start(existing=a)
        self.assertEqual(a2.ctl("version")[0], 0)

    def test_reload_moves_the_instance_lock(self):
        """A reload to a StateDirectory another daemon holds fails and keeps the running one;
        a reload to a free one moves the lock (the old lock file is removed)."""
        a = self.start(args=["--dry-run"])
        b = self.start(args=["--dry-run"])
        old_lock = os.path.join(a.tmp, "state", "vmmpowerd.pid")
        with open(a.config) as f:
            good = f.read()
        with open(a.config, "w") as f:
            f.write(good.replace(os.path.join(a.tmp, "state"), os.path.join(b.tmp, "state")))
        rc, _, err = a.ctl("reload")
        self.assertEqual(rc, 1, err)
        self.assertIn("Another vmmpowerd (pid %d) is running" % b.proc.pid, a.log())
        self.assertTrue(os.path.exists(old_lock))
        with open(os.path.join(b.tmp, "state", "vmmpowerd.pid")) as f:
            self.assertEqual(int(f.read()), b.proc.pid)
        new_state = os.path.join(a.tmp, "state2")
        with open(a.config, "w") as f:
            f.write(good.replace(os.path.join(a.tmp, "state"), new_state))
        rc, _, err = a.ctl("reload")
        self.assertEqual(rc, 0, err)
        self.assertFalse(os.path.exists(old_lock))
        with open(os.path.join(new_state, "vmmpowerd.pid")) as f:
            self.assertEqual(int(f.read()), a.proc.pid)
        rc, err = self._second(a.config, ["--dry-run"])
        self.assertIn("Another vmmpowerd (pid %d) is running with state directory %s" % (a.proc.pid, new_state), err)
        self.assertEqual(a.stop(), 0)
        self.assertFalse(os.path.exists(os.path.join(new_state, "vmmpowerd.pid")))

    def test_daemonized(self):
        """Without --foreground: the parent exits 0 once start-up is done, the lock file names
        the daemon (not the parent), a second start fails, and SIGTERM ends it (its signalfd
        is made after the fork) with socket and lock file removed."""
        d = Daemon({"Libvirt": {"Enabled": "no"}}, args=["--dry-run"])
        p = subprocess.run([VMMPOWERD, "--config", d.config, "--dry-run"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        pidfile = os.path.join(d.tmp, "state", "vmmpowerd.pid")
        with open(pidfile) as f:
            pid = int(f.read())
        self.addCleanup(lambda: os.path.exists("/proc/%d" % pid) and os.kill(pid, signal.SIGKILL))
        with open("/proc/%d/comm" % pid) as f:
            self.assertEqual(f.read().strip(), "vmmpowerd")
        self.assertEqual(d.ctl("version")[0], 0)
        rc, err = self._second(d.config, ["--dry-run"])
        self.assertNotEqual(rc, 0)
        self.assertIn("Another vmmpowerd (pid %d) is running" % pid, err)
        os.kill(pid, signal.SIGTERM)
        d.wait_for(lambda: not os.path.exists("/proc/%d" % pid), 10, "daemon %d to exit on SIGTERM" % pid)
        self.assertFalse(os.path.exists(d.socket))
        self.assertFalse(os.path.exists(pidfile))

    def test_status_tells_whether_plans_are_applied(self):
        """`vmmpowerctl status` (text and --json) tells an applier that acts from Apply = no,
        --dry-run and an applier that failed to start (its journal's state directory held by
        another process), and shows QMP errors, reloads and hook notifications. The applier
        works on a copy of a fixture sysfs tree; no VM is tracked (libvirt off, no procfs
        scan), so nothing on the host is changed."""
        import fcntl
        import shutil
        import tempfile
        fixture = os.path.join(vmlib.SOURCE_DIR, "tests", "data", "topology", "debian-2cpu-haltpoll", "sys")

        def daemon(extra=None, args=()):
            tmp = tempfile.mkdtemp(prefix="vmmpt-sysfs-")
            self.addCleanup(shutil.rmtree, tmp)
            sysfs = os.path.join(tmp, "sys")
            shutil.copytree(fixture, sysfs, symlinks=True)
            conf = {"Daemon": {"SysfsRoot": sysfs}, "QEMU": {"ProcScan": "no", "QMPSocket": os.path.join(tmp, "no.qmp")},
                    "Libvirt": {"Enabled": "no"}}
            for sec, kv in (extra or {}).items():
                conf.setdefault(sec, {}).update(kv)
            return Daemon(conf, args=list(args))

        def plans_line(d):
            rc, text, err = d.ctl("status")
            self.assertEqual(rc, 0, err)
            lines = [l for l in text.splitlines() if l.startswith("plans:")]
            self.assertEqual(len(lines), 1, text)
            return lines[0], text

        # applying
        d = daemon()
        self.start(existing=d)
        d.wait_for(lambda: d.status()["apply"].get("passes", 0) >= 1, 15, "an applier pass")
        line, text = plans_line(d)
        self.assertRegex(line, r"^plans: +applied: [1-9]\d* passes")
        self.assertTrue(d.status()["apply"]["enabled"])
        # QMP errors (a socket nobody serves), reloads, hook notifications: text and JSON
        self.assertEqual(d.ctl("notify", "started", "vmmpt-x")[0], 0)
        self.assertEqual(d.ctl("reload")[0], 0)
        d.wait_for(lambda: d.status()["qmp"]["errors"] >= 2, 15, "failed QMP queries")
        st = d.status()
        rc, text, _ = d.ctl("status")
        self.assertRegex(text, r"QMP: +1 socket, [1-9]\d* queries, [1-9]\d* errors \(1 failing, 0 kept on their "
                               r"last answer, 0 gone\)")
        self.assertIn("reloads:       1 (0 failed), 1 hook notifications", text)
        self.assertEqual((st["reloads"], st["reload_errors"], st["notifies"]), (1, 0, 1))
        self.assertEqual(st["qmp"]["failing"], 1)
        self.assertEqual(st["qmp"]["sockets"], 1)
        self.assertRegex(text, r"control: +[1-9]\d* requests, 0 denied, 0 refused \(no slot\), 0 errors")
        d.stop()

        # Apply = no
        d = daemon({"Planner": {"Apply": "no"}})
        self.start(existing=d)
        line, _ = plans_line(d)
        self.assertIn("advisory, [Planner] Apply = no", line)
        self.assertEqual(d.status()["apply"]["why"], "Apply=no")
        d.stop()

        # --dry-run
        d = daemon(args=["--dry-run"])
        self.start(existing=d)
        line, _ = plans_line(d)
        self.assertIn("advisory, --dry-run", line)
        self.assertEqual(d.status()["apply"]["why"], "dry run")
        d.stop()

        # the applier cannot open its journal: the state directory is locked by someone else
        d = daemon()
        state = os.path.join(d.tmp, "state")
        os.makedirs(state)
        fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.start(existing=d)
        line, text = plans_line(d)
        self.assertIn("NOT APPLIED: the applier failed to start", line)
        st = d.status()
        self.assertEqual((st["apply"]["enabled"], st["apply"]["why"], st["apply"]["start_errors"]),
                         (False, "failed to start", 1))
        rc, plan, _ = d.ctl("plan")
        self.assertIn("NOT APPLIED", plan)
        log("status with a failed applier: %s" % line)

    def test_sigterm_and_once(self):
        d = Daemon()
        d.start()
        self.assertEqual(d.stop(), 0)
        self.assertFalse(os.path.exists(d.socket), "control socket left behind")
        p = subprocess.run([VMMPOWERD, "--once", "--config", d.config], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("VCPU", p.stdout)
        self.assertIn("BUSY%", p.stdout)


class DaemonSecondOnHintChannel(unittest.TestCase):
    """Issue 16 item 17: two daemons fought for each VM's hint channel (QEMU serves one
    client per channel). A second daemon on the same config now exits at the instance lock,
    before libvirt discovery: the first keeps its one connection to the channel. The guest
    need not boot (the host end connects to QEMU's chardev), so it is destroyed at once."""

    def test_first_keeps_the_hint_channel(self):
        vmlib.require_root()
        vmlib.ensure_libvirtd()
        g = vmlib.define_and_start_domain("hint2", 1, test=self)
        a = Daemon(args=["--dry-run"]).start()
        self.addCleanup(a.stop)

        def hints():
            vm = a.vm_by_pid(g.pid)
            return vm and vm.get("hints")
        a.wait_for(lambda: (hints() or {}).get("connected"), 30, "the first daemon on the hint channel")
        before = hints()
        p = subprocess.run([VMMPOWERD, "--foreground", "--dry-run", "--config", a.config], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("Another vmmpowerd (pid %d) is running" % a.proc.pid, p.stderr)
        a.wait_periods(2)
        after = hints()
        self.assertTrue(after["connected"])
        self.assertEqual((after["connects"], after["disconnects"]), (before["connects"], before["disconnects"]))
        log("hint channel of %s: the first daemon stays connected (%d connect, %d disconnects), the second "
            "exited" % (g.name, after["connects"], after["disconnects"]))


class DaemonQmpBusy(unittest.TestCase):
    """A plain QEMU found only through its QMP socket stays tracked while someone else holds
    its monitor (QEMU serves one QMP client at a time: the daemon's queries time out), the
    failures are counted and shown, and the VM leaves once its process is gone. The QEMU is
    paused (-S, no guest, no disk): no CPU load."""

    def test_vm_stays_while_qmp_is_held(self):
        vmlib.require_root()
        name = vmlib.full_name("qmpbusy")
        os.makedirs(vmlib.RUN_DIR, exist_ok=True)
        qmp = os.path.join(vmlib.RUN_DIR, name + ".qmp")
        pidfile = os.path.join(vmlib.RUN_DIR, name + ".pid")
        subprocess.run(["qemu-system-x86_64", "-name", name, "-machine", "pc,accel=tcg", "-S", "-display", "none",
                        "-nodefaults", "-m", "64", "-smp", "2", "-qmp", "unix:%s,server=on,wait=off" % qmp,
                        "-daemonize", "-pidfile", pidfile], check=True, timeout=60)
        with open(pidfile) as f:
            pid = int(f.read())
        self.addCleanup(lambda: os.path.exists("/proc/%d" % pid) and os.kill(pid, signal.SIGKILL))
        d = Daemon({"QEMU": {"QMPSocket": qmp, "ProcScan": "no", "ProcScanInterval": "1s"},
                    "Libvirt": {"Enabled": "no"}}, args=["--dry-run"]).start()
        self.addCleanup(d.stop)
        d.wait_for(lambda: d.vm_by_pid(pid) is not None, 15, "QEMU %d found through QMP" % pid)
        self.assertEqual(len(d.vm_by_pid(pid)["vcpus"]), 2)

        hold = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        hold.settimeout(10)
        hold.connect(qmp)
        self.assertIn(b"QMP", hold.recv(4096))  # we have the monitor; the daemon's connects queue
        e0 = d.status()["qmp"]["errors"]
        t0 = time.monotonic()
        seen = 0
        slowest = 0.0
        while True:
            t1 = time.monotonic()
            st = d.status()
            slowest = max(slowest, time.monotonic() - t1)
            self.assertIsNotNone(d.vm_by_pid(pid), "VM dropped after %d failed QMP queries:\n%s" % (
                st["qmp"]["errors"] - e0, d.log()))
            seen += 1
            if st["qmp"]["errors"] >= e0 + 5:
                break
            self.assertLess(time.monotonic() - t0, 30, "no failed QMP queries while the monitor is held")
            time.sleep(0.2)
        self.assertGreaterEqual(st["qmp"]["kept"], 5)
        self.assertEqual(st["qmp"]["failing"], 1)
        rc, text, err = d.ctl("status")
        self.assertEqual(rc, 0, err)
        self.assertRegex(text, r"QMP: +1 sockets?, \d+ queries, [1-9]\d* errors \(1 failing, [1-9]\d* kept")
        self.assertIn("QMP query of %s failed" % qmp, d.log())
        # the queries wait on the QMP worker's thread, not on the loop that serves the control
        # socket: the slowest status answer while the monitor was held (printed, not asserted)
        log("QMP monitor held for %.1fs: %d failed queries, VM present at each of %d polls; slowest status "
            "answer %.0f ms" % (time.monotonic() - t0, st["qmp"]["errors"] - e0, seen, slowest * 1000))

        hold.close()
        d.wait_for(lambda: d.status()["qmp"]["failing"] == 0, 15, "QMP answering again")
        self.assertIsNotNone(d.vm_by_pid(pid))
        os.kill(pid, signal.SIGKILL)
        d.wait_for(lambda: d.vm_by_pid(pid) is None, 10, "the killed QEMU to leave")
        self.assertEqual(d.vm_by_pid(pid), None)


class DaemonKvmHaltPoll(unittest.TestCase):
    """KVM halt polling reaches the tracker through QMP query-stats. This host's KVM cannot
    run a stock guest kernel, but a paused KVM QEMU (-S) has real vCPU threads and real
    per-vCPU KVM stats, which is what the wiring needs."""

    def test_halt_poll_from_query_stats(self):
        vmlib.require_root()
        if not os.path.exists("/dev/kvm"):
            # No KVM, no KVM stats: the wiring cannot be exercised here. The reply parsing is
            # covered by tests/unit/test-qmp.c (recorded replies); tools/run-tests.sh lists this skip.
            self.skipTest("no /dev/kvm on this host")
        tmp = Daemon().tmp
        qmp = os.path.join(tmp, "kvm.qmp")
        pidfile = os.path.join(tmp, "kvm.pid")
        subprocess.run(["qemu-system-x86_64", "-accel", "kvm", "-S", "-smp", "2", "-m", "64",
                        "-name", "vmmpt-kvm-paused,debug-threads=on", "-nodefaults", "-display", "none",
                        "-qmp", "unix:%s,server=on,wait=off" % qmp, "-daemonize", "-pidfile", pidfile],
                       check=True, timeout=30)
        with open(pidfile) as f:
            pid = int(f.read())
        self.addCleanup(lambda: os.kill(pid, signal.SIGKILL))
        d = Daemon({"QEMU": {"QMPSocket": qmp}}).start()
        self.addCleanup(d.stop)
        d.wait_for(lambda: d.vm_by_pid(pid) is not None, 10, "the KVM QEMU")
        d.wait_periods(2)
        vm = d.vm_by_pid(pid)
        self.assertEqual(vm["accel"], "kvm")
        self.assertEqual(vm["name"], "vmmpt-kvm-paused")
        self.assertEqual(len(vm["vcpus"]), 2)
        for v in vm["vcpus"]:
            # Paused: known (not null) and zero.
            self.assertEqual(v["halt_poll_ratio"], 0.0, vm)
        log("paused KVM QEMU: halt-poll known for %d vCPUs" % len(vm["vcpus"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
