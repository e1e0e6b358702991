"""The read side: a saved result reported, two results diffed, exported and shown in Jupyter."""
