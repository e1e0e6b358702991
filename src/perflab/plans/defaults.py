"""The defaults and choices of the verbs that have no plan dataclass (memcpy, syscalls, counters,
profile), kept apart from their modules so `--help` needs neither numpy nor pandas."""

from perflab import _constants

COPY_KERNEL_NAMES = tuple(_constants.COPY_KERNELS)
PAGE = 4096
SYSCALL_NAMES = tuple(_constants.SYSCALLS)
EVENT_NAMES = tuple(_constants.EVENT_INDEX)
PROFILE_INTERVAL_S = 0.01
# Not 1000: a sampler in lockstep with the 1 kHz tick (or with timer-driven work) would see the
# same instant of each period.
SAMPLE_HZ = 999
MAX_SAMPLE_HZ = 100_000
CONTENTION_KINDS = ("mutex", "spin")
CONTENTION_MAX_THREADS = 4096
