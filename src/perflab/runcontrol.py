"""The run controls' former home: `perflab.runcontrol` is `perflab.childruns`, the same module."""

import sys

from perflab import childruns

sys.modules[__name__] = childruns
