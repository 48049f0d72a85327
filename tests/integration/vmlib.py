"""Test library for vmmpower integration tests with real TCG guests (Python 3 stdlib only).

Guests are the tiny busybox guest of tests/vm/build-guest.sh; their serial console runs a
line-command agent (tests/vm/guest-init.sh): every reply line starts with "@@ " and every
command ends with one final line "@@ ok CMD ..." or "@@ err CMD ...".

Naming: every object this library creates is called "vmmpt-<creator pid>-<name>", so that
(1) several test processes can run side by side and (2) leftovers of a crashed run are
recognised as stale (creator pid gone) and removed by cleanup_stale(), which
ensure_libvirtd() calls. Guests are destroyed (and libvirt domains undefined) by
Guest.destroy(), registered both with the TestCase (addCleanup, if given) and atexit.

Environment:
  VMMPOWER_SOURCE_DIR   source tree (default: two levels above this file)
  VMMPOWER_GUEST_DIR    guest image dir (default /var/cache/vmmpower-test/guest)
  VMMPOWER_TEST_RUNDIR  sockets, pid files (default /run/vmmpower-test)
  VMMPOWER_GUEST_MEM_MB guest memory (default 128: the guest sees ~80 MB, ~53 MB free)
"""

import atexit
import glob
import json
import os
import re
import signal
import socket
import subprocess
import time

SOURCE_DIR = os.environ.get("VMMPOWER_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VM_DIR = os.path.join(SOURCE_DIR, "tests", "vm")
GUEST_DIR = os.environ.get("VMMPOWER_GUEST_DIR", "/var/cache/vmmpower-test/guest")
RUN_DIR = os.environ.get("VMMPOWER_TEST_RUNDIR", "/run/vmmpower-test")
MEMORY_MIB = int(os.environ.get("VMMPOWER_GUEST_MEM_MB", "128"))
PREFIX = "vmmpt-"
URI = "qemu:///system"
LIBVIRT_RUN_DIR = "/run/libvirt/qemu"
CHANNEL_DIR = "/var/lib/libvirt/qemu/channel/target"
HINT_PORT = "org.vmmpower.hint.0"

_VCPU_COMM = re.compile(r"^CPU (\d+)/(TCG|KVM)$")
_NAME_RE = re.compile(r"^vmmpt-(\d+)-[A-Za-z0-9_.-]+$")


class VmError(Exception):
    pass


def require_root():
    """Integration tests need root (libvirtd, QEMU, /proc of other users): fail, not skip."""
    if os.geteuid() != 0:
        raise VmError("integration tests must run as root (they start libvirtd and QEMU "
                      "guests); run: sudo meson test -C build --suite integration")


def run(argv, check=True, timeout=120, input=None):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout, input=input)
    if check and p.returncode != 0:
        raise VmError("%s failed (rc %d): %s" % (" ".join(argv), p.returncode,
                                                 p.stderr.strip() or p.stdout.strip()))
    return p


_CONN_ERRORS = ("Failed to connect", "failed to connect", "End of file while reading",
                "Cannot recv data", "Cannot write data", "internal error: client socket")


def virsh(*args, check=True, timeout=60, input=None, retry_s=20.0):
    """Run virsh on qemu:///system. Connection failures (libvirtd being restarted, e.g. by
    a concurrent test) are retried for up to retry_s seconds."""
    argv = ["virsh", "-q", "-c", URI] + list(args)
    end = time.monotonic() + retry_s
    while True:
        p = run(argv, check=False, timeout=timeout, input=input)
        if p.returncode == 0 or time.monotonic() > end or \
                not any(e in p.stderr for e in _CONN_ERRORS):
            break
        time.sleep(0.5)
    if check and p.returncode != 0:
        raise VmError("%s failed (rc %d): %s" % (" ".join(argv), p.returncode,
                                                 p.stderr.strip() or p.stdout.strip()))
    return p


def full_name(name):
    """The real name of a test object: vmmpt-<our pid>-<name>."""
    if name.startswith(PREFIX):
        name = name[len(PREFIX):]
    n = "%s%d-%s" % (PREFIX, os.getpid(), name)
    if not _NAME_RE.match(n):
        raise VmError("bad guest name %r" % name)
    return n


# ---------------------------------------------------------------- guest image, libvirtd

class GuestImage:
    def __init__(self, d):
        self.dir = d
        self.kernel = os.path.join(d, "vmlinuz")
        self.initrd = os.path.join(d, "initramfs.cpio.gz")
        with open(os.path.join(d, "cmdline")) as f:
            self.cmdline = f.read().strip()


def ensure_guest_image(outdir=None):
    """Build (or reuse, if up to date) the guest kernel + initramfs; returns a GuestImage."""
    d = outdir or GUEST_DIR
    run([os.path.join(VM_DIR, "build-guest.sh"), d], timeout=300)
    return GuestImage(d)


def ensure_libvirtd():
    """Start libvirtd/virtlogd if needed (tests/vm/start-libvirtd.sh) and remove stale
    test objects of earlier crashed runs."""
    run([os.path.join(VM_DIR, "start-libvirtd.sh")], timeout=60)
    cleanup_stale()


def restart_libvirtd(kill=False):
    """Stop (SIGTERM, or SIGKILL with kill=True) and start libvirtd; guests keep running."""
    argv = [os.path.join(VM_DIR, "restart-libvirtd.sh")]
    if kill:
        argv.append("--kill")
    run(argv, timeout=90)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(name):
    m = _NAME_RE.match(name)
    if not m:
        return False
    pid = int(m.group(1))
    return pid != os.getpid() and not _pid_alive(pid)


def _qemu_processes():
    """Yield (pid, -name value) of running QEMU processes."""
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if not argv or not os.path.basename(argv[0]).startswith(b"qemu-system"):
            continue
        for i, a in enumerate(argv[:-1]):
            if a == b"-name":
                v = argv[i + 1].decode(errors="replace")
                # "guest=NAME,debug-threads=on" (libvirt) or "NAME,debug-threads=on"
                v = v.split(",")[0]
                if v.startswith("guest="):
                    v = v[len("guest="):]
                yield int(d[len("/proc/"):]), v
                break


def cleanup_stale():
    """Destroy/undefine libvirt domains and kill plain QEMUs named vmmpt-<pid>-* whose
    creator process is gone; remove their files. Returns the names cleaned up."""
    cleaned = []
    p = virsh("list", "--all", "--name", check=False)
    for name in p.stdout.split():
        if _stale(name):
            virsh("destroy", name, check=False)
            virsh("undefine", name, check=False)
            cleaned.append(name)
    for pid, name in _qemu_processes():
        if _stale(name):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _wait_gone(pid, 10)
            cleaned.append(name)
    for f in glob.glob(os.path.join(RUN_DIR, PREFIX + "*")):
        base = os.path.basename(f).split(".")[0]
        if _stale(base):
            try:
                os.unlink(f)
            except OSError:
                pass
    return cleaned


def _wait_gone(pid, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _pid_alive(pid):
            return True
        try:  # reap if it is our child
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return not _pid_alive(pid)


# ---------------------------------------------------------------- console

class Console:
    """Line protocol client on a guest's serial console unix socket."""

    def __init__(self, path, connect_timeout=10.0):
        self.path = path
        self.transcript = []   # every line received (for failure messages)
        self._buf = b""
        end = time.monotonic() + connect_timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                break
            except OSError as e:
                s.close()
                if time.monotonic() > end:
                    raise VmError("cannot connect to console %s: %s" % (path, e))
                time.sleep(0.1)
        self.sock = s

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None

    def send(self, line):
        self.sock.sendall(line.encode() + b"\n")

    def readline(self, timeout):
        """Next line (str, stripped) or None on timeout."""
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                d = self.sock.recv(4096)
            except socket.timeout:
                return None
            if not d:
                raise VmError("console %s closed" % self.path)
            self._buf += d
        line, self._buf = self._buf.split(b"\n", 1)
        s = line.decode(errors="replace").replace("\r", "").strip()
        self.transcript.append(s)
        return s

    def drain(self):
        while self.readline(0.01) is not None:
            pass

    def command(self, cmd, timeout=10.0):
        """Send CMD; return (final reply fields after "ok CMD", list of "@@ out" lines).
        Raises VmError on "@@ err" or timeout."""
        verb = cmd.split()[0]
        self.drain()
        self.send(cmd)
        out = []
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            line = self.readline(max(left, 0)) if left > 0 else None
            if line is None:
                raise VmError("no reply to %r within %.0fs; last console lines: %r"
                              % (cmd, timeout, self.transcript[-10:]))
            i = line.find("@@ ")
            if i < 0:
                continue
            f = line[i + 3:].split()
            if not f:
                continue
            if f[0] == "out":
                out.append(line[i + 3 + 4:])
            elif f[0] in ("ok", "err") and len(f) >= 2 and f[1] == verb:
                if f[0] == "err":
                    raise VmError("guest refused %r: %s" % (cmd, line[i:]))
                return f[2:], out

    def ping(self, timeout=2.0):
        try:
            return self.command("ping", timeout)[0] == ["pong"]
        except VmError:
            return False

    def busy(self, cpu):
        return int(self.command("busy %d" % cpu)[0][1])

    def light(self, cpu, batch, sleep_s):
        """A light loop on vCPU CPU: BATCH iterations then SLEEP_S seconds, repeated."""
        return int(self.command("light %d %d %s" % (cpu, batch, sleep_s))[0][1])

    def idle(self, cpu="all"):
        self.command("idle %s" % cpu)

    def rate(self, secs=2):
        """{vcpu: busy-loop iterations per second over secs} (0 for idle vCPUs)."""
        f, _ = self.command("rate %s" % secs, timeout=secs + 15)
        return {int(k): int(v) for k, v in (x.split("=") for x in f[1:])}

    def run(self, shell_cmd, timeout=20.0):
        """Run a shell command in the guest; returns (rc, output lines). The agent waits
        for the command's output to close: redirect background commands, e.g.
        "taskset -c 1 sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &"."""
        f, out = self.command("run " + shell_cmd, timeout)
        return int(f[0]), out


# ---------------------------------------------------------------- guests

_live = []


def _destroy_all_at_exit():
    for g in list(_live):
        try:
            g.destroy()
        except Exception:
            pass


atexit.register(_destroy_all_at_exit)


def _exit_on_signal(signum, frame):
    # meson test sends SIGTERM on timeout: turn it into SystemExit so that unittest
    # cleanups and atexit destroy the guests. SIGKILL leaves them: cleanup_stale().
    raise SystemExit(128 + signum)


for _sig in (signal.SIGTERM, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_DFL:
        signal.signal(_sig, _exit_on_signal)


class Guest:
    kind = "?"

    def __init__(self, name, vcpus):
        self.name = name
        self.vcpus = vcpus
        self.pid = None
        self.console_path = os.path.join(RUN_DIR, name + ".console")
        self._console = None
        self.started_at = time.monotonic()
        self.boot_seconds = None
        self.destroyed = False

    @property
    def console(self):
        if self._console is None:
            self._console = Console(self.console_path)
        return self._console

    def thread_names(self):
        """{tid: comm} of the QEMU process."""
        names = {}
        for d in glob.glob("/proc/%d/task/[0-9]*" % self.pid):
            try:
                with open(d + "/comm") as f:
                    names[int(os.path.basename(d))] = f.read().rstrip("\n")
            except OSError:
                pass
        return names

    def vcpu_tids(self):
        """{vcpu index: tid} from thread names "CPU n/TCG"."""
        tids = {}
        for tid, comm in self.thread_names().items():
            m = _VCPU_COMM.match(comm)
            if m:
                tids[int(m.group(1))] = tid
        return tids

    def wait_booted(self, timeout=None):
        """Ping until the guest agent answers; returns (and stores) seconds since start.
        Default timeout: $VMMPOWER_BOOT_TIMEOUT or 120 s (boots take 8-13 s on an idle
        2-CPU host, over 40 s seen when the host is heavily loaded)."""
        if timeout is None:
            timeout = float(os.environ.get("VMMPOWER_BOOT_TIMEOUT", "120"))
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not _pid_alive(self.pid):
                raise VmError("guest %s: QEMU pid %d died while booting" % (self.name, self.pid))
            try:
                if self.console.ping(1.0):
                    self.boot_seconds = time.monotonic() - self.started_at
                    return self.boot_seconds
            except VmError:
                self._drop_console()
                time.sleep(0.5)
        raise VmError("guest %s did not answer ping within %.0fs; console: %r" % (
            self.name, timeout, self._console.transcript[-20:] if self._console else []))

    def rss_kib(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None

    def utilisation(self, interval=3.0):
        """{vcpu: fraction of one host CPU} of the vCPU threads over interval seconds."""
        return {n: r for n, (r, _) in self.schedstat_rates(interval).items()}

    def demand(self, interval=3.0):
        """{vcpu: run + run-queue wait fraction} over interval (see thread_schedstat_rates)."""
        return {n: r + w for n, (r, w) in self.schedstat_rates(interval).items()}

    def schedstat_rates(self, interval=3.0):
        """{vcpu: (run, wait)} fractions of the vCPU threads over interval seconds."""
        tids = self.vcpu_tids()
        u = thread_schedstat_rates(self.pid, tids.values(), interval)
        return {n: u[t] for n, t in tids.items() if t in u}

    def _drop_console(self):
        if self._console is not None:
            self._console.close()
            self._console = None

    def destroy(self):
        raise NotImplementedError


class LibvirtGuest(Guest):
    kind = "libvirt"

    def __init__(self, name, vcpus):
        super().__init__(name, vcpus)
        self.domid = None

    def hint_socket_path(self):
        return os.path.join(CHANNEL_DIR, "domain-%s-%s" % (self.domid, self.name), HINT_PORT)

    def destroy(self):
        if self.destroyed:
            return
        self._drop_console()
        virsh("destroy", self.name, check=False)
        virsh("undefine", self.name, check=False)
        if self.pid:
            _wait_gone(self.pid, 15)
        for f in glob.glob(os.path.join(RUN_DIR, self.name + ".*")):
            try:
                os.unlink(f)
            except OSError:
                pass
        self.destroyed = True
        if self in _live:
            _live.remove(self)


class QemuGuest(Guest):
    kind = "qemu"

    def __init__(self, name, vcpus, qmp_path):
        super().__init__(name, vcpus)
        self.qmp_path = qmp_path
        self.pidfile = os.path.join(RUN_DIR, name + ".pid")

    def hint_socket_path(self):
        return os.path.join(RUN_DIR, self.name + ".hint")

    def qmp(self, execute, arguments=None):
        return qmp_command(self.qmp_path, execute, arguments)

    def destroy(self):
        if self.destroyed:
            return
        self._drop_console()
        if self.pid and _pid_alive(self.pid):
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if not _wait_gone(self.pid, 5):
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _wait_gone(self.pid, 5)
        for f in glob.glob(os.path.join(RUN_DIR, self.name + ".*")):
            try:
                os.unlink(f)
            except OSError:
                pass
        self.destroyed = True
        if self in _live:
            _live.remove(self)


def _register(g, test):
    _live.append(g)
    if test is not None:
        test.addCleanup(g.destroy)


def _extra_cmdline(busy, extra):
    parts = []
    if busy:
        parts.append("vmmpower.busy=" + ",".join(str(int(c)) for c in busy))
    if extra:
        parts.append(extra)
    return " ".join(parts)


def domain_xml(name, vcpus, image, extra_cmdline="", memory_mib=None):
    with open(os.path.join(VM_DIR, "domain.xml.in")) as f:
        xml = f.read()
    cmdline = (image.cmdline + " " + extra_cmdline).strip()
    if re.search(r"[&<>'\"]", cmdline):
        raise VmError("kernel cmdline must not contain XML metacharacters")
    subst = {"NAME": name, "VCPUS": str(int(vcpus)),
             "MEMORY_MIB": str(int(memory_mib or MEMORY_MIB)), "KERNEL": image.kernel,
             "INITRD": image.initrd, "CMDLINE": cmdline,
             "CONSOLE": os.path.join(RUN_DIR, name + ".console")}
    for k, v in subst.items():
        xml = xml.replace("@%s@" % k, v)
    return xml


def define_and_start_domain(name, vcpus, busy=(), test=None, extra_cmdline="",
                            memory_mib=None, xml_filter=None):
    """Define and start a libvirt domain vmmpt-<pid>-<name> running the test guest.
    busy: vCPUs whose busy loop starts at boot. xml_filter: optional function str->str
    to edit the domain XML. Returns a LibvirtGuest (not yet booted: call wait_booted)."""
    image = ensure_guest_image()
    n = full_name(name)
    os.makedirs(RUN_DIR, exist_ok=True)
    os.chmod(RUN_DIR, 0o755)
    xml = domain_xml(n, vcpus, image, _extra_cmdline(busy, extra_cmdline), memory_mib)
    if xml_filter:
        xml = xml_filter(xml)
    g = LibvirtGuest(n, vcpus)
    p = virsh("define", "/dev/stdin", input=xml, check=False)
    if p.returncode != 0:
        raise VmError("virsh define %s failed: %s" % (n, p.stderr.strip()))
    _register(g, test)
    g.started_at = time.monotonic()
    virsh("start", n)
    g.domid = virsh("domid", n).stdout.strip()
    with open(os.path.join(LIBVIRT_RUN_DIR, n + ".pid")) as f:
        g.pid = int(f.read().strip())
    return g


def start_plain_qemu(name, vcpus, qmp=True, busy=(), test=None, extra_cmdline=""):
    """Start the test guest under plain QEMU (tests/vm/start-qemu.sh) as vmmpt-<pid>-<name>.
    Returns a QemuGuest with .qmp_path (None if qmp=False) and .hint_socket_path()."""
    ensure_guest_image()
    n = full_name(name)
    qmp_path = os.path.join(RUN_DIR, n + ".qmp") if qmp else None
    env = dict(os.environ)
    env["VMMPOWER_GUEST_APPEND"] = _extra_cmdline(busy, extra_cmdline)
    env["VMMPOWER_GUEST_DIR"] = GUEST_DIR
    env["VMMPOWER_TEST_RUNDIR"] = RUN_DIR
    g = QemuGuest(n, vcpus, qmp_path)
    g.started_at = time.monotonic()
    p = subprocess.run([os.path.join(VM_DIR, "start-qemu.sh"), n, str(int(vcpus)),
                        qmp_path or "none"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env, timeout=60)
    if p.returncode != 0:
        raise VmError("start-qemu.sh %s failed: %s" % (n, p.stderr.strip()))
    g.pid = int(p.stdout.strip().splitlines()[-1])
    _register(g, test)
    return g


# ---------------------------------------------------------------- QMP, schedstat

def qmp_command(path, execute, arguments=None, timeout=10.0):
    """One QMP command on a unix socket (capabilities negotiated); returns "return"."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    f = s.makefile("rwb")
    try:
        def recv():
            while True:
                line = f.readline()
                if not line:
                    raise VmError("QMP %s closed" % path)
                msg = json.loads(line)
                if "event" not in msg:
                    return msg

        recv()  # greeting
        for cmd in ({"execute": "qmp_capabilities"},
                    dict({"execute": execute}, **({"arguments": arguments} if arguments else {}))):
            f.write(json.dumps(cmd).encode() + b"\n")
            f.flush()
            msg = recv()
            if "error" in msg:
                raise VmError("QMP %s: %s" % (cmd["execute"], msg["error"]))
        return msg["return"]
    finally:
        f.close()
        s.close()


def read_schedstat(pid, tid):
    """(on-CPU ns, run-queue wait ns, timeslices) of a thread from
    /proc/PID/task/TID/schedstat."""
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        v = f.read().split()
    return int(v[0]), int(v[1]), int(v[2])


def read_schedstat_ns(pid, tid):
    """On-CPU time (ns) of a thread (first field of schedstat)."""
    return read_schedstat(pid, tid)[0]


def thread_schedstat_rates(pid, tids, interval=3.0):
    """{tid: (run, wait)} over interval: fractions of the wall time the thread ran on a
    host CPU and waited runnable on a run queue. run + wait is the thread's demand: close
    to 1.0 for a busy vCPU even when other host load keeps it waiting. Threads that vanish
    during the interval are left out."""
    tids = list(tids)
    t0 = time.monotonic_ns()
    a = {}
    for t in tids:
        try:
            a[t] = read_schedstat(pid, t)
        except OSError:
            pass
    time.sleep(interval)
    t1 = time.monotonic_ns()
    res = {}
    for t, v in a.items():
        try:
            w = read_schedstat(pid, t)
        except OSError:
            continue
        res[t] = ((w[0] - v[0]) / float(t1 - t0), (w[1] - v[1]) / float(t1 - t0))
    return res


def thread_utilisation(pid, tids, interval=3.0):
    """{tid: on-CPU fraction over interval} from schedstat deltas (1.0 = one host CPU)."""
    return {t: r for t, (r, _) in thread_schedstat_rates(pid, tids, interval).items()}


def thread_demand(pid, tids, interval=3.0):
    """{tid: (on-CPU + run-queue wait) fraction over interval}: see thread_schedstat_rates."""
    return {t: r + w for t, (r, w) in thread_schedstat_rates(pid, tids, interval).items()}
