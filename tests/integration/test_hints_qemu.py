#!/usr/bin/env python3
"""Guest hints from a plain-QEMU guest (no libvirt): the VM's org.vmmpower.hint.0 port is a
QEMU `-chardev socket,...,server=on` (tests/vm/start-qemu.sh: RUN_DIR/NAME.hint), powerhintd
runs in the guest, and vmmpowerd finds the VM by its vCPU threads (/proc scan) and its channel
through [QEMU] HintSocket = RUN_DIR/%n.hint. The guest's handshake and levels must show in
`vmmpowerctl vms`; without the key the VM has no channel; a socket owned by another user than
the QEMU process is refused. libvirt is off and plans are not applied: nothing but this
test's own guest is touched. Must run as root."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmlib  # noqa: E402
from daemonlib import Daemon  # noqa: E402

SRC = os.path.join(vmlib.SOURCE_DIR, "guest", "virtio-powerhint")
HIGH = 768   # level of a busy vCPU (powerhintd sends 1024 from /proc/stat)
LOW = 512


def log(msg):
    print("[hints-qemu] " + msg, flush=True)


def daemon_sections(hint_socket):
    qemu = {"ProcScanInterval": "1s"}
    if hint_socket is not None:
        qemu["HintSocket"] = hint_socket
    return {"Libvirt": {"Enabled": "no"}, "Planner": {"Apply": "no"}, "QEMU": qemu}


class HintsPlainQemu(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        vmlib.require_root()
        cls.work = tempfile.mkdtemp(prefix="vmmpt-hints-qemu-")
        extra = os.path.join(cls.work, "extra")
        os.makedirs(os.path.join(extra, "bin"))
        b = os.path.join(cls.work, "src")
        shutil.copytree(SRC, b, ignore=shutil.ignore_patterns("tests"))
        subprocess.run(["make", "-s", "-C", b, "powerhintd", "powerhint"], check=True)
        for f in ("powerhintd", "powerhint"):
            shutil.copy(os.path.join(b, f), os.path.join(extra, "bin", f))
        os.environ["VMMPOWER_GUEST_EXTRA_DIR"] = extra
        os.environ.pop("VMMPOWER_GUEST_EXTRA_KO", None)
        # A guest image of our own: other test runs build theirs with other extras.
        vmlib.GUEST_DIR = os.path.join(cls.work, "guest")
        vmlib.ensure_guest_image()
        cls.g = vmlib.start_plain_qemu("hintsq", 2, qmp=False)
        log("guest booted in %.1fs" % cls.g.wait_booted(120))
        rc, out = cls.g.console.run("powerhintd </dev/null >/tmp/powerhintd.log 2>&1 &")
        assert rc == 0, out
        cls.pattern = os.path.join(vmlib.RUN_DIR, "%n.hint")
        cls.d = None

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "d", None):
            cls.d.stop()
        if hasattr(cls, "g"):
            cls.g.destroy()
        shutil.rmtree(cls.work, ignore_errors=True)

    def start_daemon(self, hint_socket):
        if self.d:
            self.d.stop()
        self.__class__.d = Daemon(sections=daemon_sections(hint_socket)).start()
        return self.d

    def vm(self):
        return self.d.vm_by_pid(self.g.pid)

    def hints(self):
        return (self.vm() or {}).get("hints")

    def levels(self):
        return {v["index"]: (v["hint"] or {}).get("level") for v in self.vm()["vcpus"]}

    def test_0_check_config(self):
        """vmmpowerd --check-config names the line of a bad HintSocket and accepts a good one."""
        from daemonlib import VMMPOWERD
        for value, ok in (("/run/qemu/web1.hint", False), ("run/%n.hint", False), ("/run/%x.hint", False),
                          (self.pattern, True)):
            d = Daemon(sections=daemon_sections(value))
            p = subprocess.run([VMMPOWERD, "--check-config", "--config", d.config], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, timeout=30)
            shutil.rmtree(d.tmp, ignore_errors=True)
            log("--check-config HintSocket = %s: rc %d, %s" % (value, p.returncode, p.stdout.strip()))
            if ok:
                self.assertEqual(p.returncode, 0, p.stdout)
            else:
                self.assertNotEqual(p.returncode, 0, p.stdout)
                self.assertIn("invalid value for HintSocket: '%s'" % value, p.stdout)
                self.assertRegex(p.stdout, r"vmmpower\.conf:\d+: ")

    def test_1_without_key_no_channel(self):
        """The control: a plain-QEMU VM has no hint channel unless HintSocket names it."""
        self.start_daemon(None)
        self.d.wait_for(lambda: self.vm() is not None, 30, "the QEMU VM in vmmpowerctl vms")
        self.d.wait_periods(3)
        self.assertIsNone(self.hints(), self.vm())

    def test_2_hints_reach_vms(self):
        self.start_daemon(self.pattern)
        vm = None
        waited = self.d.wait_for(lambda: (self.hints() or {}).get("handshaked"), 30, "hint handshake")
        vm = self.vm()
        log("VM %s (pid %d): handshake %.1fs after the daemon started, agent %s, sources %s" % (
            vm["name"], vm["pid"], waited, vm["hints"]["agent"], vm.get("sources")))
        self.assertEqual(vm["name"], self.g.name)
        self.assertTrue(vm["hints"]["connected"])
        self.assertEqual(vm["hints"]["agent"], "powerhintd/0.1")
        self.g.console.idle("all")
        self.d.wait_for(lambda: all((lv or 0) <= LOW for lv in self.levels().values()), 30, "idle levels")
        self.g.console.busy(1)
        waited = self.d.wait_for(lambda: (self.levels().get(1) or 0) >= HIGH, 30, "vCPU1 level up")
        log("busy loop on vCPU1: levels %s after %.1fs" % (self.levels(), waited))
        self.assertLessEqual(self.levels()[0] or 0, LOW)
        self.g.console.idle("all")
        self.d.wait_for(lambda: (self.levels().get(1) or 0) <= LOW, 60, "vCPU1 level down")
        h = self.hints()
        self.assertGreater(h["accepted"], 0)
        self.assertEqual(h["rejected"], 0, h)

    def test_3_socket_of_another_user_refused(self):
        self.start_daemon(self.pattern)
        self.d.wait_for(lambda: (self.hints() or {}).get("handshaked"), 30, "hint handshake")
        path = self.g.hint_socket_path()
        st = os.stat(path)
        os.chown(path, 65534, 65534)
        try:
            waited = self.d.wait_for(lambda: self.hints() is None, 30, "channel dropped")
            log("socket chowned to 65534: channel gone after %.1fs" % waited)
            self.d.wait_periods(2)
            self.assertIsNone(self.hints())
            rc, out, _ = self.d.ctl("metrics")
            refused = [float(l.split()[1]) for l in out.splitlines()
                       if l.startswith("vmmpower_qemu_hint_refused_total ")]
            log("vmmpower_qemu_hint_refused_total %s" % refused)
            self.assertEqual(rc, 0)
            self.assertEqual(len(refused), 1, out)
            self.assertGreater(refused[0], 0)
            self.assertIn("Not connecting to the hint socket of QEMU VM", self.d.log())
        finally:
            os.chown(path, st.st_uid, st.st_gid)
        waited = self.d.wait_for(lambda: (self.hints() or {}).get("handshaked"), 30, "handshake again")
        log("owner restored: handshake again after %.1fs" % waited)


if __name__ == "__main__":
    unittest.main(verbosity=2)
