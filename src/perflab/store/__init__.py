"""Storing, written once: the journal, recording, identity, row checks, the schema, results and
the file lock."""
