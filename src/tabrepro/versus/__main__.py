"""`python -m tabrepro.versus`: see tabrepro.versus.cli."""

import sys

from tabrepro.versus.cli import main

if __name__ == "__main__":  # spawned case processes import this module as __mp_main__
    sys.exit(main())
