"""Every process perflab starts runs under a supervisor, so that none outlives perflab or its run.

The supervisor is a small helper (csrc/spawner/supervise.c) that starts the processes a run
asks for and is their parent; a child subreaper, so that what they leave (a setsid daemon, a
double fork) becomes its child too. When the run closes it, and when perflab dies however it
dies (SIGKILL included: it watches perflab's pidfd), it kills everything left, by a cgroup of
its own where one can be made, reaps it and removes its temporary directory. docs/processes.md
says what holds where (root or not, cgroup or not, which kernel).

What it runs may signal it or the helper, and kill() asks only for the same uid: both drop
the signals their programs send them, and a stop (which none can refuse) is undone, by the
supervisor for its children, by perflab for the supervisor and for children in perflab's own
process group, whenever it waits on them (WATCH_S); a helper or supervisor a program killed is
said as such (Lost).
"""

import array
import contextlib
import errno
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from perflab.core import bindings, constants
from perflab.errors import Lost, PerflabError, TimedOut

HELPER = Path(constants.__file__).resolve().parent / "_spawner"  # built beside the C core
CGROUP_EMPTY_TRIES = 100  # a killed cgroup is removable once its last task has fully exited
# How often perflab looks, while it waits on a helper, whether a program stopped it: the
# supervisor resumes its children at once, this is for the supervisor itself.
WATCH_S = 0.1


def stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T; a ptrace stop, t, is its tracer's)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"T"


def _resume(pidfd: int, pid: int) -> bool:
    """SIGCONT to a stopped process through its pidfd (its pid cannot be reused meanwhile)."""
    if pidfd < 0 or not stopped(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(pidfd, signal.SIGCONT)
    return True


def ending(returncode: int | None) -> str:
    """How a helper ended, in a phrase: killed by which signal, or its exit status."""
    if returncode is None:
        return "closed its socket"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name} (a program it ran may have signalled it)"
    return f"exited with status {returncode}"


class Usage(NamedTuple):
    """A reaped child's rusage, its waited-for children's included (named as resource's)."""

    ru_utime: float
    ru_stime: float
    ru_maxrss: int
    ru_minflt: int
    ru_majflt: int
    ru_nvcsw: int
    ru_nivcsw: int


class Child:
    """A process the supervisor started, waited for through its pidfd: it stays a zombie that
    /proc still shows until wait() has the supervisor reap it."""

    def __init__(self, supervisor: "Supervisor", pid: int):
        self.supervisor, self.pid = supervisor, pid
        self.pidfd = os.pidfd_open(pid)  # no reuse of the pid is possible before the reap
        self.status: int | None = None
        self.returncode: int | None = None
        self.usage: Usage | None = None
        self.resumed = 0  # how often it was found stopped (by itself or another) and resumed

    def ended(self, timeout: float | None = None) -> bool:
        """Whether it has ended, waiting up to timeout seconds (None: until it does); a zombie
        still, its figures final (what it counted, what /proc says of it). While it waits, a
        stop of it or of its supervisor is undone (Supervisor.watch)."""
        if self.returncode is not None:
            return True
        if self.pidfd < 0:
            raise PerflabError(f"process {self.pid} was ended with its supervisor")
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        until = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        while True:
            left = WATCH_S if until is None else min(WATCH_S, until - time.monotonic())
            if poller.poll(max(left, 0.0) * 1000):
                return True
            if until is not None and time.monotonic() >= until:
                return False
            self.supervisor.watch()

    def wait(self, timeout: float | None = None) -> int | None:
        """Its return code as Popen's (-N: killed by signal N), once it has ended and been
        reaped; None if it still runs after timeout seconds."""
        if self.returncode is None:
            if not self.ended(timeout):
                return None
            self.status, self.usage = self.supervisor.reap(self)
            self.returncode = os.waitstatus_to_exitcode(self.status)
        return self.returncode

    def outcome(self) -> tuple[int, Usage]:
        """Its wait status and rusage, once it has ended (waited for)."""
        self.wait()
        assert self.status is not None and self.usage is not None
        return self.status, self.usage

    def poll(self) -> int | None:
        """Its return code if it has ended, else None."""
        return self.wait(0)

    def send_signal(self, sig: int) -> None:
        if self.pidfd >= 0 and self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def kill_group(self) -> None:
        """SIGKILL its process group: one of its own, where what it forked stays."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def forget(self) -> None:
        """Its pidfd closed: reaped, or ended with its supervisor."""
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


class Supervisor:
    """One supervising process: start() what a run needs under it; close() (the end of a with
    block, or perflab's death) kills whatever is left and removes its directory.

    pid: the supervisor's, the parent of every process it starts (what perf attaches to, and
    what inherited counters are opened on, to count them); tmpdir: the directory it made with
    tmp=True; cgroup: the cgroup v2 its processes run in, or None (cgroup_error says why).
    """

    def __init__(self, tmp: bool = False) -> None:
        if not (HELPER.exists() and os.access(HELPER, os.X_OK)):
            raise PerflabError(f"perflab's helper {HELPER} is missing: reinstall perflab")
        parent = tempfile.gettempdir() if tmp else ""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with theirs:
            try:
                self.proc = subprocess.Popen(
                    [str(HELPER), "supervise", str(theirs.fileno()), str(os.getpid()), parent],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    process_group=0,  # a signal to perflab's group (Ctrl-C) is not its own
                )
            except BaseException:
                ours.close()
                raise
        self.sock, self.owner = ours, os.getpid()
        self.proc_fd = os.pidfd_open(self.proc.pid)  # Popen may reap it: this pins its pid
        self.lock = threading.Lock()  # one request and its reply at a time
        self.children: set[Child] = set()
        self.tmpdir: Path | None = None
        self.cgroup: str | None = None
        try:
            hello = self._reply()
            text = self._recv(hello.text_len).split(b"\0")
        except BaseException:
            self.close()
            raise
        self.pid, self.cgroup_error = hello.pid, hello.cgroup_error
        self.tmpdir = Path(os.fsdecode(text[0])) if text[0] else None
        self.cgroup = os.fsdecode(text[1]) or None
        if hello.error:
            self.close()
            why = os.strerror(hello.error)
            raise PerflabError(f"cannot make a temporary directory in {parent}: {why}")

    def __enter__(self) -> "Supervisor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def note(self) -> str:
        """How this run's processes are bounded, in one phrase."""
        if self.cgroup:
            return f"child subreaper and cgroup {self.cgroup}"
        return f"child subreaper (no cgroup: {os.strerror(self.cgroup_error)})"

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        fds: Sequence[int | None] = (0, 1, 2),
        cpus: Sequence[int] = (),
        group: int = 0,
        sigdef: bool = False,
        no_aslr: bool = False,
    ) -> Child:
        """Start argv (argv[0] looked up on env's PATH when it holds no slash, as subprocess
        does) with exactly env (None: perflab's); fds[i] (None: /dev/null) is its fd i and it
        has no other; on cpus (none: perflab's own); in process group `group` (0: one of its
        own); with sigdef every signal at its default action, else the dispositions perflab
        was given; with no_aslr its address space laid out without randomisation
        (personality ADDR_NO_RANDOMIZE, as `--aslr off` runs a sweep's children). An execve
        that fails raises OSError as subprocess does (FileNotFoundError, PermissionError...);
        a failure before it, PerflabError."""
        env = dict(os.environ) if env is None else env
        path = _find(argv[0], env)
        if len(fds) > bindings.SUP_MAX_FDS:
            raise ValueError(f"at most {bindings.SUP_MAX_FDS} fds")
        request = bindings.sup_start(
            os.fsencode(path),
            [os.fsencode(a) for a in argv],
            [os.fsencode(f"{k}={v}") for k, v in env.items()],
            len(fds),
            cpus,
            group,
            sigdef,
            no_aslr,
        )
        with contextlib.ExitStack() as stack:
            null = -1
            if None in fds:
                null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
                stack.callback(os.close, null)
            reply = self._exchange(request, [null if fd is None else fd for fd in fds])
        if reply.error and reply.stage == bindings.SUP_EXEC:
            raise OSError(reply.error, os.strerror(reply.error), argv[0])
        if reply.error:
            raise PerflabError(f"{argv[0]}: could not be started: {os.strerror(reply.error)}")
        child = Child(self, reply.pid)
        self.children.add(child)
        return child

    def watch(self) -> None:
        """Undo a stop of the supervisor, and of any child it started: nothing under perflab
        is stopped on purpose, and perflab, running this, is not stopped itself (a Ctrl-Z
        that stops a child in its group stops perflab too, and `fg` resumes them together)."""
        if self.owner != os.getpid():
            return
        _resume(self.proc_fd, self.proc.pid)
        for child in list(self.children):
            if _resume(child.pidfd, child.pid):
                child.resumed += 1

    def reap(self, child: Child) -> tuple[int, Usage]:
        """The wait status and rusage of a child that has ended, which the supervisor reaps."""
        reply = self._exchange(bindings.sup_reap(child.pid), [])
        if reply.error:
            raise OSError(reply.error, os.strerror(reply.error), f"reap {child.pid}")
        child.forget()
        self.children.discard(child)
        usage = Usage(reply.utime_ns / 1e9, reply.stime_ns / 1e9, reply.maxrss_kb, reply.minflt,
                      reply.majflt, reply.nvcsw, reply.nivcsw)  # fmt: skip
        return reply.status, usage

    def close(self) -> None:
        """End the run: everything started and what it left is killed and reaped, the directory
        removed, when this returns. Idempotent; a forked copy of perflab closes only its end."""
        if self.sock.fileno() < 0:
            return
        self.sock.close()
        for child in self.children:
            child.forget()
        self.children.clear()
        if self.owner != os.getpid():
            return
        poller = select.poll()
        poller.register(self.proc_fd, select.POLLIN)
        while not poller.poll(WATCH_S * 1000):  # a stop a program gave it is undone meanwhile
            _resume(self.proc_fd, self.proc.pid)
        code = self.proc.wait()
        os.close(self.proc_fd)
        self.proc_fd = -1
        if code != 0:
            self._after_crash()

    def _after_crash(self) -> None:
        """The supervisor was killed (its own SIGKILL): what it could not do, done from here.
        Its children died with it (PR_SET_PDEATHSIG); their descendants only by the cgroup."""
        if self.cgroup:
            cgroup = Path(self.cgroup)
            with contextlib.suppress(OSError):
                (cgroup / "cgroup.kill").write_text("1")
            for _ in range(CGROUP_EMPTY_TRIES):
                try:
                    cgroup.rmdir()
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.01)
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def _exchange(self, request: bytes, fds: list[int]) -> bindings.SupReply:
        with self.lock:
            try:
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                try:
                    sent = self.sock.sendmsg([request], rights if fds else [])
                    self.sock.sendall(request[sent:])
                except (BrokenPipeError, ConnectionResetError):
                    raise Lost(f"perflab's supervisor {HELPER} {self._end()}") from None
                return self._reply()
            except BaseException:
                self.close()  # out of step with the supervisor: the run ends here
                raise

    def _reply(self) -> bindings.SupReply:
        return bindings.sup_reply(self._recv(bindings.SUP_REPLY_BYTES))

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        try:
            recv_exactly(self.sock, buf, lambda: _resume(self.proc_fd, self.proc.pid))
        except (OSError, Lost):
            raise Lost(f"perflab's supervisor {HELPER} {self._end()}") from None
        return bytes(buf)

    def _end(self) -> str:
        """How the supervisor ended, once its socket did."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            return ending(self.proc.wait(1.0))
        return ending(None)


class Finished(NamedTuple):
    """A bounded command's end, as subprocess.run's: its return code and its output."""

    returncode: int
    stdout: str
    stderr: str


# How long a build or link command may take before perflab kills it (--build-timeout).
BUILD_TIMEOUT_S = 600.0
OUTPUT_KEEP = 16 << 20  # of a build's stdout and of its stderr, the last bytes kept (its errors)
LEFT_OUT = rb"\[perflab: (\d+) bytes of output left out\]\n"
_build_timeout = [BUILD_TIMEOUT_S]


@contextlib.contextmanager
def build_timeout(seconds: float) -> Iterator[None]:
    """Build and link commands (run_bounded) killed after `seconds` within the block."""
    before = _build_timeout[0]
    _build_timeout[0] = seconds
    try:
        yield
    finally:
        _build_timeout[0] = before


def run_bounded(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Finished:
    """Run a build or link command (no shell) to its end, its output captured, under a
    supervisor of its own: past the build timeout it and everything it started are killed
    (it stopped, or never returns) and PerflabError says so. An execve that fails raises
    OSError as subprocess does."""
    timeout = _build_timeout[0]
    with Supervisor() as under:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            try:
                child = under.start(argv, env, fds=(None, out_w, err_w))
            finally:
                os.close(out_w)
                os.close(err_w)
            got = _drain({out_r: bytearray(), err_r: bytearray()}, child, timeout)
        finally:
            os.close(out_r)
            os.close(err_r)
        if got is None:
            raise TimedOut(
                f"{shlex.join(argv)} did not finish within {timeout:g} s (--build-timeout "
                "SECONDS allows more): it and what it started were killed"
            )
        code = child.wait()
        assert code is not None
    return Finished(code, *(os.fsdecode(bytes(b)) for b in got.values()))


def _drain(bufs: dict[int, bytearray], child: Child, timeout: float) -> dict[int, bytearray] | None:
    """Read the pipes into bufs until the child has ended and they are dry (what it left
    running may hold them open), undoing stops; None once timeout seconds have passed."""
    until = time.monotonic() + timeout
    poller = select.poll()
    for fd in bufs:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    open_fds = set(bufs)
    while open_fds:
        left = until - time.monotonic()
        if left <= 0:
            return None
        ready = poller.poll(min(left, WATCH_S) * 1000)
        for fd, _ in ready:
            chunk = os.read(fd, 65536)
            _keep(bufs[fd], chunk)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
        if not ready:
            child.supervisor.watch()
            if child.ended(0):  # ended, its pipes held by what it left: what they hold is read
                for fd in list(open_fds):
                    with contextlib.suppress(BlockingIOError):
                        while chunk := os.read(fd, 65536):
                            _keep(bufs[fd], chunk)
                break
    else:
        if not child.ended(max(until - time.monotonic(), 0.0)):
            return None
    for buf in bufs.values():
        _keep(buf, b"", slack=0)
    return bufs


def _keep(buf: bytearray, chunk: bytes, slack: int = 1 << 20) -> None:
    """A chunk of a build's output added to buf, of which the last OUTPUT_KEEP bytes stay, after
    a line saying how many were left out: a build that floods its output (gigabytes of it)
    does not fill perflab's memory, nor its log the disk. Trimmed once `slack` bytes more came
    (a mebibyte: not at every chunk), to the exact bound at the end (slack 0)."""
    buf += chunk
    said = re.match(LEFT_OUT, buf)
    said_len = len(said[0]) if said else 0
    if len(buf) - said_len > OUTPUT_KEEP + slack:
        gone = (int(said[1]) if said else 0) + len(buf) - said_len - OUTPUT_KEEP
        del buf[: len(buf) - OUTPUT_KEEP]
        buf[:0] = b"[perflab: %d bytes of output left out]\n" % gone


def recv_exactly(
    sock: socket.socket, buf: bytearray | memoryview, watch: Callable[[], object] | None = None
) -> None:
    """Fill buf from a helper's socket, calling watch() every WATCH_S while none comes (to
    undo a stop of the helper); Lost when it ends, or OSError (ECONNRESET), before it is full."""
    view = memoryview(buf).cast("B")
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    while view.nbytes:
        if watch is not None and not poller.poll(WATCH_S * 1000):
            watch()
            continue
        got = sock.recv_into(view)
        if got == 0:
            raise Lost("its socket closed")
        view = view[got:]


def _find(name: str, env: Mapping[str, str]) -> str:
    """The file a name runs, as subprocess finds it: itself with a slash, else on env's PATH."""
    if os.sep in name:
        return name
    found = shutil.which(name, path=os.pathsep.join(os.get_exec_path(dict(env))))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    return found
