"""`python -m hpctl` runs the CLI."""

import sys

from hpctl.cli import main

sys.exit(main())
