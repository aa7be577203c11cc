"""`python -m dpfl` is the `dpfl` command."""

from dpfl.cli import main

if __name__ == "__main__":  # not when a spawned helper process imports it (dpfl.reproduce.local)
    main()
