"""`python -m dpfl` is the `dpfl` command."""

from dpfl.cli import main

if __name__ == "__main__":  # not when imported (a spawned process re-imports the main module)
    main()
