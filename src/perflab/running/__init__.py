"""Running, written once: child runs, lanes (--jobs), the shift engine, in-process chunks,
campaigns, interrupts and progress."""
