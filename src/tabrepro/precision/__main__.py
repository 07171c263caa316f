import sys

from tabrepro.precision.compare import main

sys.exit(main())
