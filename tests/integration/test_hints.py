#!/usr/bin/env python3
"""Guest hints end to end: a libvirt TCG guest with the org.vmmpower.hint.0 channel, the
virtio_powerhint cpufreq module and powerhintd inside; the real vmmpowerd on the host.
A busy vCPU in the guest raises that vCPU's hint level in the daemon, going idle brings it
back, and restarting vmmpowerd or powerhintd resumes the flow by itself. Must run as root."""

import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmlib  # noqa: E402
from daemonlib import Daemon  # noqa: E402

SRC = os.path.join(vmlib.SOURCE_DIR, "guest", "virtio-powerhint")
# Readable by QEMU's user (libvirt-qemu): not a private temp dir.
GUEST_DIR = "/var/cache/vmmpower-test/guest-hints"
HIGH = 768   # level of a busy vCPU (powerhintd sends 1024)
LOW = 512    # an idle vCPU's level stays at or below neutral


def log(msg):
    print("[hints] " + msg, flush=True)


def build_guest_extras(work):
    """Static powerhintd/powerhint and the module, built from the tree (like vm-roundtrip.py)."""
    extra = os.path.join(work, "extra")
    os.makedirs(os.path.join(extra, "bin"))
    b = os.path.join(work, "src")
    shutil.copytree(SRC, b, ignore=shutil.ignore_patterns("tests"))
    subprocess.run(["make", "-s", "-C", b, "powerhintd", "powerhint"], check=True)
    for f in ("powerhintd", "powerhint"):
        shutil.copy(os.path.join(b, f), os.path.join(extra, "bin", f))
    ko = os.path.join(work, "virtio_powerhint.ko")
    subprocess.run([os.path.join(SRC, "check-module-build.sh")], check=True, env=dict(os.environ, OUT_KO=ko))
    os.environ["VMMPOWER_GUEST_EXTRA_KO"] = ko
    os.environ["VMMPOWER_GUEST_EXTRA_DIR"] = extra


class HintsEndToEnd(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        vmlib.require_root()
        vmlib.ensure_libvirtd()
        cls.work = "/var/cache/vmmpower-test/hints-build"
        shutil.rmtree(cls.work, ignore_errors=True)
        os.makedirs(cls.work)
        build_guest_extras(cls.work)
        vmlib.GUEST_DIR = GUEST_DIR
        vmlib.ensure_guest_image()
        cls.g = vmlib.define_and_start_domain("hints", 2)
        log("guest booted in %.1fs" % cls.g.wait_booted(120))
        cls.start_agent()
        cls.d = Daemon().start()

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "d"):
            cls.d.stop()
        if hasattr(cls, "g"):
            cls.g.destroy()
        shutil.rmtree(cls.work, ignore_errors=True)

    @classmethod
    def start_agent(cls):
        rc, out = cls.g.console.run("powerhintd </dev/null >/tmp/powerhintd.log 2>&1 &")
        assert rc == 0, out

    def vm(self):
        return self.d.vm_by_pid(self.g.pid)

    def levels(self):
        vm = self.vm()
        return {v["index"]: (v["hint"] or {}).get("level") for v in vm["vcpus"]}

    def wait_handshake(self, timeout=30):
        return self.d.wait_for(lambda: ((self.vm() or {}).get("hints") or {}).get("handshaked"), timeout,
                               "hint channel handshake")

    def test_1_handshake(self):
        waited = self.wait_handshake()
        h = self.vm()["hints"]
        log("handshake seen %.1fs after the daemon started: agent %s, trust %s" % (waited, h["agent"], h["trust"]))
        self.assertTrue(h["connected"])
        self.assertEqual(h["agent"], "powerhintd/0.1")
        self.assertEqual(h["rejected"], 0, h)

    def test_2_busy_raises_level_idle_lowers_it(self):
        self.wait_handshake()
        self.g.console.idle("all")
        self.d.wait_for(lambda: all((l or 0) <= LOW for l in self.levels().values()), 30, "idle levels")
        t0 = time.monotonic()
        self.g.console.busy(1)
        waited = self.d.wait_for(lambda: (self.levels().get(1) or 0) >= HIGH, 30, "vCPU1 level up")
        log("busy loop on vCPU1: host level %s after %.2fs (incl. the guest's own sampling)" % (
            self.levels(), time.monotonic() - t0))
        self.assertLessEqual(self.levels()[0] or 0, LOW)
        self.g.console.idle("all")
        waited = self.d.wait_for(lambda: (self.levels().get(1) or 0) <= LOW, 60, "vCPU1 level down")
        log("idle again: host level %s after %.2fs" % (self.levels(), waited))
        h = self.vm()["hints"]
        self.assertGreater(h["accepted"], 0)
        self.assertEqual(h["rejected"], 0, h)

    def test_3_daemon_restart_resumes(self):
        self.wait_handshake()
        self.assertEqual(self.d.stop(), 0)
        self.__class__.d = Daemon().start()
        waited = self.wait_handshake()
        log("restarted vmmpowerd: handshake again after %.1fs" % waited)
        self.g.console.busy(0)
        self.d.wait_for(lambda: (self.levels().get(0) or 0) >= HIGH, 30, "vCPU0 level up after restart")
        self.g.console.idle("all")

    def test_4_agent_restart_resumes(self):
        self.wait_handshake()
        before = self.vm()["hints"]["lines"]
        rc, _ = self.g.console.run("kill $(pidof powerhintd); sleep 1")
        self.assertEqual(rc, 0)
        self.start_agent()
        self.d.wait_for(lambda: self.vm()["hints"]["lines"] > before + 5, 30, "lines from the new agent")
        self.g.console.busy(1)
        self.d.wait_for(lambda: (self.levels().get(1) or 0) >= HIGH, 30, "vCPU1 level up after agent restart")
        self.g.console.idle("all")


if __name__ == "__main__":
    unittest.main(verbosity=2)
