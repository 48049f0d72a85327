#!/usr/bin/env python3
"""Demo driver for tools/demo.sh: two libvirt guests, vmmpowerd on built-in defaults, then the
same guests packed under an energy model in which packing saves (this host's own sysfs has no
idle states or cpufreq: the model derived from it finds nothing to save)."""

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("VMMPOWER_SOURCE_DIR", ROOT)
import vmlib  # noqa: E402
from test_packing import core_model, cpu_idle_us  # noqa: E402

BUILD = os.path.join(ROOT, "build")
seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 12


def show(title, *args):
    print("\n$ vmmpowerctl " + " ".join(args) + "    # " + title, flush=True)
    subprocess.run([os.path.join(BUILD, "vmmpowerctl")] + list(args))


def idle_shares(seconds):
    """Each host CPU's idle share over the next `seconds` (cpuidle time, else /proc/stat)."""
    cpus = sorted(os.sched_getaffinity(0))
    t0, a = time.monotonic(), [cpu_idle_us(c) for c in cpus]
    time.sleep(seconds)
    dt, b = time.monotonic() - t0, [cpu_idle_us(c) for c in cpus]
    return {c: min(1.0, (y - x) / 1e6 / dt) for c, x, y in zip(cpus, a, b)}


def fmt_shares(sh):
    return ", ".join("CPU %d %.0f%% idle" % (c, 100 * v) for c, v in sorted(sh.items()))


def plan_json():
    p = subprocess.run([os.path.join(BUILD, "vmmpowerctl"), "plan", "--json"], capture_output=True, text=True)
    return json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else {}


def packing_phase(guests):
    """Both guests idle; the daemon with a model in which packing saves: the vCPUs end up on
    one CPU and the other CPU's idle share rises."""
    model = core_model(os.path.join(ROOT, "config", "models", "xeon-spr-2s.model"))
    conf = tempfile.NamedTemporaryFile("w", prefix="vmmpower-demo-pack-", suffix=".conf", delete=False)
    conf.write("[Planner]\nModelFile = %s\nShrinkDwell = 2s\nProfile = batch\n" % model)
    conf.close()
    print("\nPacking.  This host's sysfs has no cpuidle states and no cpufreq, so the model derived "
          "from it finds nothing to save by packing (modelled power above: plan = spread).  Here "
          "the daemon gets this host's topology with the per-core figures of the shipped Sapphire "
          "Rapids model (C6 on an empty core), written to %s, a 2 s ShrinkDwell (default 10 s) "
          "to keep the demo short, and the batch profile (the default latency profile packs only "
          "where a wake-up finds a free pCPU 99%% of the time; on 2 pCPUs it keeps both).  Both "
          "guests idle." % model, flush=True)
    before = idle_shares(5)
    print("  daemon off, 5 s: " + fmt_shares(before), flush=True)
    args = [os.path.join(BUILD, "vmmpowerd"), "--foreground", "--config", conf.name]
    print("\n$ " + " ".join(args) + "    # %s: [Planner] ModelFile, ShrinkDwell = 2s, Profile = batch" % conf.name, flush=True)
    daemon = subprocess.Popen(args)
    try:
        end = time.monotonic() + 60
        mine = [g.pid for g in guests]
        while time.monotonic() < end:
            p = plan_json()
            cpus = {v["cpu"] for v in p.get("vcpus", []) if v["pid"] in mine}
            if len(cpus) == 1 and -1 not in cpus:
                break
            time.sleep(1)
        time.sleep(2)
        after = idle_shares(5)
        show("the guests' vCPUs packed: one active pCPU for both guests", "plan")
        for g in guests:
            print("\n$ virsh vcpupin %s" % g.name, flush=True)
            subprocess.run(["virsh", "vcpupin", g.name])
        print("\n  daemon off: " + fmt_shares(before), flush=True)
        print("  packed:     " + fmt_shares(after), flush=True)
        print("  (other programs on this host run where the kernel puts them: on a busy host the "
              "freed CPU's idle share is what they leave)", flush=True)
    finally:
        daemon.terminate()
        daemon.wait(10)
        os.unlink(model)
        os.unlink(conf.name)


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
    daemon.terminate()
    daemon.wait(10)
    daemon = None
    idle.console.idle("all")
    packing_phase([busy, idle])
    print("\n$ virsh vcpupin %s    # after SIGTERM: every pin restored" % idle.name, flush=True)
    subprocess.run(["virsh", "vcpupin", idle.name])
finally:
    if daemon:
        daemon.terminate()
        daemon.wait(10)
    busy.destroy()
    idle.destroy()
print("\nDone: guests destroyed, daemon stopped.")
