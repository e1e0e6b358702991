"""The defaults of the verbs whose experiment has no package of its own yet (defaults.py): an
experiment's plan lives in its package (lab/<name>/), light enough for --help."""
