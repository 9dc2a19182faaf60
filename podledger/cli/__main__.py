"""`python -m podledger.cli`, as the console script runs it."""

import sys

from podledger.cli import main

sys.exit(main())
