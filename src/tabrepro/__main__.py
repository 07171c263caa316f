"""`python -m tabrepro` runs the CLI (the workflow rules call it this way, with their own Python)."""

import sys

from tabrepro.cli import main

sys.exit(main())
