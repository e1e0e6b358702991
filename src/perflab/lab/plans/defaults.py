"""The defaults and choices of the verb that has no plan dataclass (profile), kept
apart from their modules so `--help` needs neither numpy nor pandas."""

from perflab.core import constants

PROFILE_INTERVAL_S = 0.01
SAMPLE_HZ = constants.SAMPLE_HZ
MAX_SAMPLE_HZ = constants.MAX_SAMPLE_HZ
