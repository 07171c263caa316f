"""`python -m tabrepro.cli`: the same as the `tabrepro` command."""

import sys

from tabrepro.cli import main

sys.exit(main())
