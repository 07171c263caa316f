import sys

from benchmarks.precision.compare import main

sys.exit(main())
