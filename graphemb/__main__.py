"""``python -m graphemb``: the command line (see :mod:`graphemb.cli`)."""

import sys

from graphemb.cli import main

if __name__ == "__main__":
    sys.exit(main())
