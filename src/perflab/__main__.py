"""`python -m perflab` runs the CLI."""

from perflab.cli import main

main()
