"""What every experiment shares, written once: child runs, lanes (--jobs), the journal and
the result store, progress, in-process timing targets and campaigns."""
