"""Facts about this machine and its tools: CPUs and caches, the compiler, binary layout,
counters, perf samples, /proc and taskstats readers."""
