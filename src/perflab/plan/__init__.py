"""The words every experiment shares: Controls and the plan base, checked once."""
