"""taskstats.c: a listener for every thread's exit record, and the records it has queued."""

from perflab.core.constants import ffi, lib

EXIT_RECORD_FIELDS = ("tgid", "tid", "ppid", "etime_us", "utime_us", "stime_us", "vcsw",
                      "ivcsw", "cpu_delay_ns", "cpu_ns", "read_ns")  # fmt: skip


def taskstats_listen(cpumask: str) -> int:
    """A non-blocking socket registered for the exits on `cpumask`'s CPUs, or -errno."""
    return int(lib.perflab_taskstats_listen(cpumask.encode()))


def taskstats_read(fd: int, most: int) -> tuple[list[dict], bool, int]:
    """The exit records queued on the listener now (at most `most`) as dicts, whether the
    kernel dropped some (ENOBUFS), and 0 or -errno."""
    out = ffi.new("struct perflab_exit_record[]", most)
    lost = ffi.new("int *")
    n = int(lib.perflab_taskstats_read(fd, out, most, lost))
    records = [
        {k: int(getattr(r, k)) for k in EXIT_RECORD_FIELDS}
        | {"comm": ffi.string(r.comm).decode(errors="replace")}
        for r in out[0 : max(n, 0)]
    ]
    return records, bool(lost[0]), min(n, 0)
