"""`python -m dpfl` is the `dpfl` command."""

from dpfl.cli import main

main()
