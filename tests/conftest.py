"""Shared fixtures: a CLI runner, perflab where real-time priority is refused, and timing
comparisons that tell a busy machine from a wrong result."""

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

# Imported before pytester's in-process runs snapshot sys.modules: a pandas first imported inside
# one is dropped after it, and the next run's fresh copy meets the old one's classes
# ("AssertionError: <class 'pandas.arrays.ArrowStringArray'>" when a file runs alone); scipy's
# special functions (the intervals' binomial CDF) load numpy.fft, whose C module loads once only.
import pandas  # noqa: F401
import pytest
import scipy.special  # noqa: F401
import suite_runs
from click.testing import CliRunner

from perflab.errors import PerflabError
from perflab.lab import registry
from perflab.store import filelock
from perflab.system import compiler, machine

# A suite started in the background of a script (`cmd &` without job control) inherits SIGINT
# ignored, and so would every perflab it starts: the tests of Ctrl-C would send it to nobody
# (a profile of `sleep 30` ran its 30 s). The suite runs as a user at a terminal would.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def no_rt_prefix() -> list[str]:
    """A command prefix under which SCHED_FIFO is refused: nothing if it already is here, else
    setpriv dropping CAP_SYS_NICE (root only); a skip where neither holds."""
    if not machine.realtime_allowed():
        return []
    if resource.getrlimit(resource.RLIMIT_RTPRIO)[0] > 0:
        pytest.skip("RLIMIT_RTPRIO grants real-time priority without CAP_SYS_NICE")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("real-time is granted here and only root with setpriv can drop it")
    return ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice"]


def own_children() -> list:
    """This process's descendants, less perflab's helpers (the spawner and its supervisor live
    for the process)."""
    import psutil

    from perflab.system import supervisor

    def is_helper(p) -> bool:
        try:
            return p.exe() == str(supervisor.HELPER)
        except psutil.Error:
            return False

    return [c for c in psutil.Process().children(recursive=True) if not is_helper(c)]


def _busy_s() -> float:
    """CPU time every CPU has spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _ours_s() -> float:
    """CPU time of this process and all its descendants, reaped ones included."""
    import psutil

    total = 0.0
    for p in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


@pytest.fixture
def alone():
    """Around a test that compares timings: a failure while other tasks kept the CPUs busy
    (and real-time priority could not keep them off) is a skip that says so, not a verdict."""

    @contextlib.contextmanager
    def measuring():
        busy, ours, start = _busy_s(), _ours_s(), time.monotonic()
        try:
            yield
        except AssertionError:
            others = (_busy_s() - busy) - (_ours_s() - ours)
            share = others / ((time.monotonic() - start) * len(machine.usable_cpus()))
            if share > 0.05:
                pytest.skip(f"other tasks used {share:.0%} of the CPUs while this measured")
            raise

    return measuring


# chain.h, which compile_children puts beside every child's source: `chain(n)`, n steps of a
# multiply-add chain held in a register, for the children whose time is their work, n times the
# multiply's latency. A loop through a volatile variable was the yardstick before: on an AMX
# Xeon guest (family 6 model A7h) its store-to-load forwarding ran at 0.9 ticks a step for a
# stretch of runs and at 6 for the next, while this chain held 2.5-2.8 (`sweep env-size --max 7
# --repeat 25`, three sweeps of each in a row).
CHAIN = r"""
static void chain(unsigned long n)
{
    unsigned long x = n;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        __asm__ volatile("" : "+r"(x));
    }
    __asm__ volatile("" : : "r"(x));
}
"""

# The tests' pthread program: argv[1] threads each do argv[2] steps of a dependent chain and exit
# (argv[1] "-": the count from $NTHREADS; 0: main does the steps itself); main then sleeps
# argv[3] ms (default 0), so its threads are gone from /proc before it exits. Fixed work per
# thread: a run's CPU time is its thread count times one thread's, on any machine.
WORKER = r"""
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include "chain.h"
static long iterations;

static void *work(void *arg)
{
    (void)arg;
    chain((unsigned long)iterations);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *env = getenv("NTHREADS");
    int n = argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : env ? atoi(env) : 1;
    long ms = argc > 3 ? atol(argv[3]) : 0;
    struct timespec nap = {ms / 1000, ms % 1000 * 1000000L};
    pthread_t t[64];
    iterations = argc > 2 ? atol(argv[2]) : 1000;
    if (n < 0 || n > 64 || iterations < 0)
        return 2;
    if (n == 0)
        work(NULL);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, work, (void *)(long)i) != 0)
            return 1;
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    nanosleep(&nap, NULL);
    return 0;
}
"""


@pytest.fixture(params=["made-up", pytest.param("real", marks=pytest.mark.long)])
def children(request):
    """A test of what perflab does with run records, twice: its children made up (a
    FakeSpawner, which it yields, chosen for every run) in the suite, and real (None) in CI's
    long step."""
    if request.param == "real":
        yield None
        return
    from fakespawner import FakeSpawner

    from perflab.running import spawn

    with spawn.chosen(FakeSpawner()) as fake:
        yield fake


def long_beyond(cells, fast) -> list:
    """A parametrized matrix's cells, those outside `fast` marked long: each behaviour keeps a
    cell in the README's ten-minute suite, and the whole matrix runs in CI's long step."""
    return [c if c in fast else pytest.param(*(c if isinstance(c, tuple) else (c,)),
                                             marks=pytest.mark.long) for c in cells]  # fmt: skip


def compile_children(directory: Path, sources: dict[str, str], opt: str = "1", static=False):
    """Each C source built into `directory` with $CC, static where the libc allows it: the
    tests' own children, made the way the workloads are."""
    from perflab.system import compiler

    out = {}
    (directory / "chain.h").write_text(CHAIN)
    for name, src in sources.items():
        (directory / f"{name}.c").write_text(src)
        argv = [*compiler.compiler(), f"-O{opt}", "-Wall", "-I", str(compiler.WORKLOADS)]
        argv += [str(directory / f"{name}.c"), "-o", str(directory / name)]
        if not (static and subprocess.run([*argv, "-static"], capture_output=True).returncode == 0):
            subprocess.run(argv, check=True)
        out[name] = str(directory / name)
    return out


# A loop of argv[1] turns: a count of instructions n times its body plus start-up.
LOOP = r"""
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    volatile long s = 0;
    for (long i = 0; i < n; i++) s += i;
    return 0;
}
"""
PROG = r"""
#include "chain.h"
int main(void) {
    chain(%d);
    return 0;
}
"""
_REPOS: dict[str, dict[str, str]] = {}


def new_repo(repo: Path):
    """`git init` in repo (made if missing); a function that runs git there and returns its
    stdout, as a fixed author."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip

    repo.mkdir(exist_ok=True)
    git("init", "-q")
    return git


def slowed_repo() -> dict[str, str]:
    """A git repository of a C program (made once per session, removed at exit): four
    commits, the third makes its loop 8x longer (2 ms to 16 ms); {repo}, {good} (the first),
    {bad} (the last) and each commit's sha as c0..c3."""
    if not _REPOS:
        import atexit
        import tempfile

        repo = Path(tempfile.mkdtemp(prefix="perflab-test-repo-"))
        atexit.register(shutil.rmtree, repo, True)
        git = new_repo(repo)
        shas = {}
        for i, (loops, note) in enumerate(
            [
                (2_000_000, ""),
                (2_000_000, "// tidy\n"),
                (16_000_000, "// tidy\n"),
                (16_000_000, "// done\n"),
            ]
        ):
            (repo / "chain.h").write_text(CHAIN)
            (repo / "prog.c").write_text(note + PROG % loops)
            git("add", "prog.c", "chain.h")
            git("commit", "-q", "-m", f"commit {i}")
            shas[f"c{i}"] = git("rev-parse", "HEAD")
        _REPOS["r"] = {"repo": str(repo), "good": shas["c0"], "bad": shas["c3"], **shas}
    return _REPOS["r"]


def tiny_words(e: registry.Experiment, cpu: int | None = None) -> list[str]:
    """The registry's tiny run of e, its placeholders given (a repository made when it names
    one)."""
    cpu = machine.usable_cpus()[0] if cpu is None else cpu
    given = {"cpu": str(cpu)}
    if "{repo}" in suite_runs.of(e.name).tiny:
        given |= {k: v for k, v in slowed_repo().items() if k in ("repo", "good", "bad")}
    return suite_runs.of(e.name).argv(**given)


def tiny_argv(name: str) -> list[str]:
    """An experiment's smallest real run through its verb, as the registry gives it."""
    e = registry.get(name)
    assert e.verb is not None, name
    return [*e.verb.split(), *tiny_words(e)]


def wait_for(ready, what: str, seconds: float = 300.0) -> None:
    """Poll `ready()` until true; the bound only guards a hang (a loaded CI host is slow)."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {seconds:.0f} s")
        time.sleep(0.01)


def lock_free(out: Path) -> bool:
    """True once no perflab run holds OUT's lock (a killed run's last child releases it at exec)."""
    try:
        filelock.check_free(out)
    except PerflabError:
        return False
    return True


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> str:
    """The built-in link-order workload in its default order, built in the session's own cache;
    argument 2 makes it do twice the work (compare's real A/B runs)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    try:
        return str(compiler.link(compiler.linkorder_objects(), compiler.builtin_linker()).path)
    finally:
        mp.undo()


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MiB tmpfs (root only: a skip elsewhere), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], check=True)


def fill_disk(mnt: Path, leave: int) -> Path:
    """A file taking all but `leave` bytes (rounded up to pages) of the tmpfs."""
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    filler = mnt / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - -(-leave // 4096) * 4096))
    return filler
