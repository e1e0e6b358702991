"""The words an assertion decides with, shared by its record and its report (which the record
renders, so neither can hold them for the other)."""

DISTURBED = 1.5  # a run over this many times its target's fastest counts as disturbed

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
