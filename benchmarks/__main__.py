"""`python -m benchmarks ...`: the main benchmark (`benchmarks.bench`); `kb bench ...` runs the same."""

import sys

from benchmarks.bench import main

if __name__ == "__main__":
    sys.exit(main())
