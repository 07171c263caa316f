"""`python -m benchmarks.versus`: see benchmarks.versus.cli."""

import sys

from benchmarks.versus.cli import main

if __name__ == "__main__":  # spawned case processes import this module as __mp_main__
    sys.exit(main())
