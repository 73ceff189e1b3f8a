"""``python -m wp_autotrace``: the command-line interface."""

import sys

from .cli import main

sys.exit(main())
