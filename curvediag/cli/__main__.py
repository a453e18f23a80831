"""``python -m curvediag.cli``."""

import sys

from curvediag.cli import main

sys.exit(main())
