"""The workload compiler's former name: `perflab.build` is `perflab.compiler`, the same module."""

import sys

from perflab import compiler

sys.modules[__name__] = compiler
