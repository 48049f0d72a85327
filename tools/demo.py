#!/usr/bin/env python3
"""Demo driver for tools/demo.sh: two libvirt guests, vmmpowerd on built-in defaults."""

import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("VMMPOWER_SOURCE_DIR", ROOT)
import vmlib  # noqa: E402

BUILD = os.path.join(ROOT, "build")
seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 12


def show(title, *args):
    print("\n$ vmmpowerctl " + " ".join(args) + "    # " + title, flush=True)
    subprocess.run([os.path.join(BUILD, "vmmpowerctl")] + list(args))


vmlib.ensure_libvirtd()
vmlib.ensure_guest_image()
print("Starting two guests under libvirt (TCG): 'busy' runs a loop on vCPU 0, 'idle' does nothing.")
busy = vmlib.define_and_start_domain("demo-busy", 2, busy=[0])
idle = vmlib.define_and_start_domain("demo-idle", 2)
daemon = None
try:
    for g in (busy, idle):
        print("  %s booted in %.1fs (QEMU pid %d)" % (g.name, g.wait_booted(120), g.pid), flush=True)
    # The embedded default: no /etc/vmmpower/vmmpower.conf needed.  If one exists we leave it
    # out of the demo by pointing --config at an empty file.
    empty = tempfile.NamedTemporaryFile(prefix="vmmpower-demo-", suffix=".conf")
    args = [os.path.join(BUILD, "vmmpowerd"), "--foreground"]
    if os.path.exists("/etc/vmmpower/vmmpower.conf"):
        args += ["--config", empty.name]
    print("\n$ " + " ".join(args), flush=True)
    daemon = subprocess.Popen(args)
    time.sleep(3)
    show("the daemon", "status")
    show("host CPUs: topology, busy share, idle residency", "cpus")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        show("every VM and vCPU thread with its load", "vms")
        time.sleep(3)
    busy.console.idle("all")
    idle.console.busy(1)
    print("\nNow guest 'busy' goes idle and guest 'idle' turns busy on vCPU 1 ...", flush=True)
    time.sleep(4)
    show("the load follows", "vms")
    show("the plan the daemon applies: which pCPU each vCPU is pinned to, and why", "plan")
    print("\n$ virsh vcpupin %s    # the live pins, made through libvirt" % idle.name, flush=True)
    subprocess.run(["virsh", "vcpupin", idle.name])
finally:
    if daemon:
        daemon.terminate()
        daemon.wait(10)
        print("\n$ virsh vcpupin %s    # after SIGTERM: every pin restored" % idle.name, flush=True)
        subprocess.run(["virsh", "vcpupin", idle.name])
    busy.destroy()
    idle.destroy()
print("\nDone: guests destroyed, daemon stopped.")
