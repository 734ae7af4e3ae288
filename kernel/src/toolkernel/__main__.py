"""``python -m toolkernel`` runs the command line."""

import sys

from toolkernel.cli import main

sys.exit(main())
