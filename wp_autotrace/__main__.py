"""``python -m wp_autotrace``: the command-line interface."""

import sys

from .cli.main import main

sys.exit(main())
