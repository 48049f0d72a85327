#!/usr/bin/env python3
"""Tests of the VM test tooling itself (tests/vm/*, vmlib.py) with real TCG guests:
a libvirt guest with 2 vCPUs and a plain QEMU guest with 1 vCPU; vCPU thread names,
vCPU thread ids cross-checked with QMP, load control in the guest checked through the
host's schedstat, the guest's work-rate report, the hint channel socket, and cleanup.
Must run as root (fails otherwise)."""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmlib  # noqa: E402

BUSY_MIN = 0.80   # fraction of a host CPU for a vCPU running the busy loop
IDLE_MAX = 0.20   # ... for an idle vCPU


def log(msg):
    print("[vm_tooling] " + msg, flush=True)


class VmToolingTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        vmlib.require_root()
        t = time.monotonic()
        vmlib.ensure_guest_image()
        log("guest image ready in %.2fs (%s)" % (time.monotonic() - t, vmlib.GUEST_DIR))
        t = time.monotonic()
        vmlib.ensure_libvirtd()
        log("libvirtd ready in %.2fs" % (time.monotonic() - t))

    def measure(self, g, what, interval):
        rw = g.schedstat_rates(interval)
        log("%s: %s: vCPU run/wait fractions %s" % (g.name, what, {
            n: "%.2f/%.2f" % v for n, v in sorted(rw.items())}))
        self.assertEqual(sorted(rw), list(range(g.vcpus)))
        return {n: r + w for n, (r, w) in rw.items()}

    # Busy/idle is judged on demand (run + run-queue wait): other load on the host may
    # keep a busy vCPU thread waiting, but it still wants a whole host CPU.
    def check_load_control(self, g, busy_vcpu):
        c = g.console
        c.idle("all")
        c.busy(busy_vcpu)
        time.sleep(1.0)
        d = self.measure(g, "busy %d" % busy_vcpu, 3.0)
        self.assertGreater(d[busy_vcpu], BUSY_MIN)
        for n, v in d.items():
            if n != busy_vcpu:
                self.assertLess(v, IDLE_MAX, "vCPU %d should be idle" % n)

        r = c.rate(2)
        log("%s: rate with busy %d: %s" % (g.name, busy_vcpu, r))
        self.assertEqual(sorted(r), list(range(g.vcpus)))
        self.assertGreater(r[busy_vcpu], 0)
        for n, v in r.items():
            if n != busy_vcpu:
                self.assertEqual(v, 0)

        c.idle("all")
        time.sleep(1.0)
        d = self.measure(g, "idle all", 2.0)
        for n, v in d.items():
            self.assertLess(v, IDLE_MAX, "vCPU %d should be idle after 'idle all'" % n)
        self.assertEqual(set(c.rate(1).values()), {0})

    def check_threads(self, g):
        names = g.thread_names()
        vcpu_names = sorted(n for n in names.values() if n.startswith("CPU "))
        self.assertEqual(vcpu_names, ["CPU %d/TCG" % i for i in range(g.vcpus)])
        tids = g.vcpu_tids()
        self.assertEqual(sorted(tids), list(range(g.vcpus)))
        for tid in tids.values():
            self.assertTrue(os.path.exists("/proc/%d/task/%d" % (g.pid, tid)))
        return tids

    def check_destroyed(self, g):
        pid = g.pid
        g.destroy()
        self.assertFalse(os.path.exists("/proc/%d" % pid), "QEMU %d still running" % pid)
        self.assertEqual([f for f in os.listdir(vmlib.RUN_DIR) if f.startswith(g.name + ".")],
                         [])
        self.assertNotIn(g.name, vmlib.virsh("list", "--all", "--name").stdout.split())

    def test_libvirt_guest(self):
        g = vmlib.define_and_start_domain("tool-lv", 2, test=self)
        boot = g.wait_booted()
        log("libvirt guest %s (2 vCPUs) booted in %.2fs, QEMU pid %d, RSS %d KiB"
            % (g.name, boot, g.pid, g.rss_kib()))
        tids = self.check_threads(g)
        # libvirt's view of the vCPU threads must match the thread names
        p = vmlib.virsh("qemu-monitor-command", g.name, '{"execute":"query-cpus-fast"}')
        qtids = {c["cpu-index"]: c["thread-id"] for c in json.loads(p.stdout)["return"]}
        self.assertEqual(qtids, tids)
        self.assertTrue(os.path.exists(g.hint_socket_path()), g.hint_socket_path())
        rc, out = g.console.run("cat /sys/class/virtio-ports/*/name")
        self.assertEqual((rc, out), (0, [vmlib.HINT_PORT]))
        self.check_load_control(g, 0)
        self.check_load_control(g, 1)
        self.check_destroyed(g)

    def test_plain_qemu_guest(self):
        g = vmlib.start_plain_qemu("tool-q", 1, qmp=True, busy=[0], test=self)
        boot = g.wait_booted()
        log("plain QEMU guest %s (1 vCPU) booted in %.2fs, pid %d, RSS %d KiB"
            % (g.name, boot, g.pid, g.rss_kib()))
        tids = self.check_threads(g)
        qtids = {c["cpu-index"]: c["thread-id"] for c in g.qmp("query-cpus-fast")}
        self.assertEqual(qtids, tids)
        self.assertTrue(os.path.exists(g.hint_socket_path()))
        # vmmpower.busy=0 on the kernel command line started a loop at boot
        self.assertEqual(g.console.command("busylist")[0], ["0"])
        self.assertGreater(g.console.rate(2)[0], 0)
        self.check_load_control(g, 0)
        self.check_destroyed(g)

    def test_stale_cleanup(self):
        # A guest named after a dead creator pid is removed by cleanup_stale().
        dead = os.fork()
        if dead == 0:
            os._exit(0)
        os.waitpid(dead, 0)
        name = "vmmpt-%d-stale" % dead
        image = vmlib.ensure_guest_image()
        xml = vmlib.domain_xml(name, 1, image)
        p = vmlib.run(["virsh", "-q", "-c", vmlib.URI, "define", "/dev/stdin"], input=xml)
        self.addCleanup(vmlib.virsh, "undefine", name, check=False)
        self.assertIn(name, vmlib.virsh("list", "--all", "--name").stdout.split())
        cleaned = vmlib.cleanup_stale()
        self.assertIn(name, cleaned)
        self.assertNotIn(name, vmlib.virsh("list", "--all", "--name").stdout.split())
        del p


if __name__ == "__main__":
    unittest.main(verbosity=2)
