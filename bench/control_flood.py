#!/usr/bin/env python3
"""Control socket under a hostile ControlGroup member: prints numbers, asserts nothing.

  sudo python3 bench/control_flood.py [BUILD_DIR] [SECONDS]

Starts BUILD_DIR/vmmpowerd (--dry-run, libvirt and the procfs scan off, ControlGroup =
nogroup) on a temp socket, then:
  1. denial flood: one member (uid 60000, gid nogroup) sends "reload" (denied) on a fresh
     connection as fast as it can for SECONDS; prints requests, the daemon's log lines and
     its CPU share (utime + stime of /proc/PID/stat over the flood);
  2. lockout: 8 members (uids 60000-60007) reconnect in a loop, each keeping every
     connection it gets open; root runs `vmmpowerctl notify started vmmpt-x` (2 s timeout,
     as the libvirt hook does) 20 times; prints how many were answered OK.
Run on an idle machine; a loaded one inflates the CPU share of (1)."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
GID = 65534
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / TICK


def as_member(uid):
    os.setgroups([])
    os.setgid(GID)
    os.setuid(uid)


def flood_denied(path, seconds):
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            s.sendall(b"reload\n")
            while s.recv(256):
                pass
            n += 1
        except OSError:
            pass
        finally:
            s.close()
    return n


def hold(path, seconds):
    held = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(0.2)
        try:
            s.connect(path)
            held.append(s)
        except OSError:
            s.close()
        # drop connections the server closed, keep the rest
        keep = []
        for c in held:
            try:
                c.setblocking(False)
                if c.recv(64, socket.MSG_PEEK) == b"":
                    c.close()
                    continue
                keep.append(c)
            except BlockingIOError:
                keep.append(c)
            except OSError:
                c.close()
        held = keep[-200:]
        time.sleep(0.001)


def fork(fn, uid, *args):
    pid = os.fork()
    if pid == 0:
        try:
            as_member(uid)
            fn(*args)
        finally:
            os._exit(0)
    return pid


def main():
    tmp = tempfile.mkdtemp(prefix="vmmpt-bench-")
    os.chmod(tmp, 0o755)
    sock = os.path.join(tmp, "control.sock")
    conf = os.path.join(tmp, "vmmpower.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nStateDirectory = %s/state\nControlSocket = %s\nControlGroup = nogroup\n"
                "ControlPeriod = 1s\n[QEMU]\nProcScan = no\n[Libvirt]\nEnabled = no\n" % (tmp, sock))
    logpath = os.path.join(tmp, "log")
    logf = open(logpath, "wb")
    d = subprocess.Popen([os.path.join(BUILD, "vmmpowerd"), "-f", "-n", "-c", conf], stdout=logf, stderr=logf)
    ctl = [os.path.join(BUILD, "vmmpowerctl"), "--socket", sock]
    try:
        for _ in range(100):
            if subprocess.run(ctl + ["version"], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        lines0 = open(logpath).read().count("\n")
        r, w = os.pipe()
        c0 = cpu_s(d.pid)
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            as_member(60000)
            n = flood_denied(sock, SECONDS)
            os.write(w, b"%d" % n)
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        n = int(os.read(r, 64) or b"0")
        wall = time.monotonic() - t0
        cpu = cpu_s(d.pid) - c0
        lines = open(logpath).read().count("\n") - lines0
        print("denial flood: %d denied requests in %.1f s, %d daemon log lines, daemon CPU %.1f%% of a core"
              % (n, wall, lines, 100 * cpu / wall))

        pids = [fork(hold, 60000 + i, sock, 20 + SECONDS) for i in range(8)]
        time.sleep(2)
        ok = 0
        for _ in range(20):
            try:
                p = subprocess.run(ctl + ["notify", "started", "vmmpt-x"], capture_output=True, timeout=2)
                ok += p.returncode == 0
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.2)
        for p in pids:
            os.kill(p, signal.SIGKILL)
            os.waitpid(p, 0)
        print("lockout: 8 members holding every connection they get; root's notify answered %d of 20" % ok)
    finally:
        d.terminate()
        d.wait(10)
        logf.close()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
