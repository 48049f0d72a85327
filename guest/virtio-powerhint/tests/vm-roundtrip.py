#!/usr/bin/env python3
"""Hint round trip in a real TCG guest (manual / integration check, needs root and QEMU).

Builds a test guest (tests/vm/build-guest.sh) with virtio_powerhint.ko loaded at boot and the
static powerhintd/powerhint in /bin, starts it under plain QEMU with the
org.vmmpower.hint.0 port, plays the host end of the port, and checks:
  1. the module registered as the cpufreq driver and schedutil calls it (powerhint_requests
     grows, powerhint_request follows a busy loop);
  2. powerhintd, started as the README says (`powerhintd &`, default socket) in a guest
     without /run, finds the port by name in sysfs and sends HELLO + LEVEL/UTIL batches;
  3. a host GRANT lands in cpuN/cpufreq/powerhint_grant; scaling_cur_freq stays the request;
  4. `powerhint boost` reaches the host as BOOST;
  5. the host end closing and reconnecting: the agent notices, logs both at its default
     level, does not spin, re-sends.
Usage: vm-roundtrip.py (as root).  Builds the static binaries and the module in a scratch
directory, prints what it saw, exits 1 if a check failed.  About 30-60 s.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
TOP = os.path.dirname(os.path.dirname(SRC))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))

work = tempfile.mkdtemp(prefix="ph-vm.")
os.environ.setdefault("VMMPOWER_GUEST_DIR", os.path.join(work, "guest"))
os.environ.setdefault("VMMPOWER_TEST_RUNDIR", os.path.join(work, "run"))

import vmlib  # noqa: E402  (reads the environment above)

CPUFREQ = "/sys/devices/system/cpu/cpu%d/cpufreq/"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def until(fn, secs):
    """Poll fn() every 0.2 s until it returns a true value or secs pass; its last value."""
    end = time.monotonic() + secs
    while True:
        v = fn()
        if v or time.monotonic() >= end:
            return v
        time.sleep(0.2)


def build():
    extra = os.path.join(work, "extra")
    os.makedirs(os.path.join(extra, "bin"))
    b = os.path.join(work, "bin")
    shutil.copytree(SRC, b, ignore=shutil.ignore_patterns("tests"))
    subprocess.run(["make", "-s", "-C", b, "powerhintd", "powerhint"], check=True)
    for f in ("powerhintd", "powerhint"):
        shutil.copy(os.path.join(b, f), os.path.join(extra, "bin", f))
    ko = os.path.join(work, "virtio_powerhint.ko")
    subprocess.run([os.path.join(SRC, "check-module-build.sh")], check=True,
                   env=dict(os.environ, OUT_KO=ko))
    os.environ["VMMPOWER_GUEST_EXTRA_KO"] = ko
    os.environ["VMMPOWER_GUEST_EXTRA_DIR"] = extra


class Host:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""
        self.lines = []

    def read(self, secs):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            self.s.settimeout(max(0.05, end - time.monotonic()))
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            self.buf += d
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                self.lines.append(line.decode("ascii", "replace"))

    def send(self, text):
        self.s.sendall(text.encode())

    def last(self, prefix):
        for line in reversed(self.lines):
            if line.startswith(prefix):
                return line
        return None


def main():
    vmlib.require_root()
    build()
    g = vmlib.start_plain_qemu("powerhint", 2, qmp=False)
    try:
        print("booted in %.1f s" % g.wait_booted())
        con = g.console
        rc, out = con.run("cat /proc/modules")
        check(any(l.startswith("virtio_powerhint ") for l in out), "virtio_powerhint loaded")
        rc, out = con.run("cat %sscaling_driver %sscaling_governor %sscaling_available_frequencies"
                          % ((CPUFREQ % 0,) * 3))
        print("  cpu0:", out)
        check(rc == 0 and out[:2] == ["powerhint", "schedutil"],
              "driver powerhint, governor schedutil")

        def requests(cpu):
            rc, out = con.run("cat %spowerhint_requests %spowerhint_request"
                              % (CPUFREQ % cpu, CPUFREQ % cpu))
            return int(out[0]), int(out[1])

        n0, r0 = requests(1)
        con.busy(1)
        seen = {}

        def busy_requested():
            seen["n1"], seen["r1"] = requests(1)
            return seen["n1"] > n0 and seen["r1"] >= 896
        until(busy_requested, 20)
        n1, r1 = seen["n1"], seen["r1"]
        print("  cpu1 governor calls %d -> %d, request level %d -> %d (busy)" % (n0, n1, r0, r1))
        check(n1 > n0, "schedutil calls the driver on cpu1")
        check(r1 >= 896, "busy cpu1 requests a high level (%d)" % r1)

        host = Host(g.hint_socket_path())
        # The README's init step in a busybox initramfs without /run: plain `powerhintd &`.
        rc, out = con.run("rm -rf /run; powerhintd </dev/null >/tmp/powerhintd.log 2>&1 &")
        check(rc == 0, "powerhintd started (%r)" % out)
        host.read(4)
        hello = host.last("HELLO ")
        print("  host got:", host.lines[-6:])
        check(hello == "HELLO 1 vcpus=2 agent=powerhintd/0.1", "HELLO from powerhintd")
        lv1 = host.last("LEVEL 1 ")
        check(lv1 is not None and int(lv1.split()[2]) >= 896, "LEVEL for busy cpu1 (%s)" % lv1)
        host.send("WELCOME 1 vcpus=2 max_level=1024 boost_cap_ms=500 rate=10 burst=20 trust=full\n"
                  "GRANT 0 256\nGRANT 1 640\n")

        def granted():
            seen["grant"] = con.run("cat %spowerhint_grant %sscaling_cur_freq" % (CPUFREQ % 1, CPUFREQ % 1))
            return seen["grant"][1][:1] == ["640"]
        until(granted, 15)
        rc, out = seen["grant"]
        print("  cpu1 grant / scaling_cur_freq:", out)
        check(out and out[0] == "640", "GRANT written to powerhint_grant")
        # the grant is reported, not made current: cpu1 is busy, its current frequency is the
        # governor's request (the top entry), not the granted 1250000 kHz (virtio_powerhint.c)
        check(len(out) > 1 and out[1] == "2000000", "current frequency stays the busy cpu1's request")
        rc, out = con.run("powerhint boost 200ms --cpu 0")
        check(out == ["OK"], "powerhint boost answered OK (%r)" % out)
        host.read(2)
        check("BOOST 0 200" in host.lines, "BOOST reached the host")
        rc, out = con.run("powerhint status")
        print("  powerhint status:\n    " + "\n    ".join(out))

        # The host end goes away: the port reports POLLHUP and writes fail with EAGAIN; the
        # agent must neither spin nor give up, and must re-send everything on reconnect.
        host.s.close()

        def disconnected():
            seen["status"] = con.run("powerhint status")
            out = seen["status"][1]
            return out and "host=disconnected" in out[0]
        until(disconnected, 20)
        rc, out = seen["status"]
        check(out and "host=disconnected" in out[0], "agent sees the host end closed (%s)"
              % (out[0] if out else None))
        rc, out = con.run("cat /proc/$(pidof powerhintd)/stat")
        f = out[0].rsplit(")", 1)[1].split()
        ticks = int(f[11]) + int(f[12])
        check(ticks < 200, "agent not spinning while disconnected (%d ticks of CPU)" % ticks)
        host = Host(g.hint_socket_path())
        host.read(3)
        check("HELLO 1 vcpus=2 agent=powerhintd/0.1" in host.lines and host.last("LEVEL 0 "),
              "full state re-sent after reconnect (%r)" % host.lines[:6])
        con.idle()
        rc, out = con.run("cat /tmp/powerhintd.log; ls -l /run/powerhintd.sock")
        print("  powerhintd log:", out)
        check(any(l.startswith("s") and l.endswith(" /run/powerhintd.sock") for l in out),
              "powerhintd created /run for its socket")
        check(any(" went away, re-sending the state every period" in l for l in out),
              "the host end going away is logged at the default level")
        check(any("host connected again on" in l for l in out), "the reconnect is logged")

        # The agent survives the module going away (falls back to /proc/stat), and the
        # module unloads cleanly with its sysfs files.
        rc, _ = con.run("rmmod virtio_powerhint")
        check(rc == 0, "rmmod virtio_powerhint")
        rc, out = con.run("ls /sys/devices/system/cpu/cpufreq/ 2>&1; cat /proc/modules")
        check(not any(l.startswith("virtio_powerhint ") for l in out)
              and not any(l.startswith("policy") for l in out), "module and its policies gone")
        host.read(3)
        rc, out = con.run("powerhint status")
        check(rc == 0 and not any("request=" in l for l in out),
              "agent still running, without governor requests (%r)" % out[-2:])
    finally:
        g.destroy()
        shutil.rmtree(work, ignore_errors=True)
    print("FAILED: %s" % failures if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
