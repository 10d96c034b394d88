"""``python -m fanoutsim``: the same as the ``fanoutsim`` command."""

import sys

from fanoutsim.cli import main

if __name__ == "__main__":
    sys.exit(main())
