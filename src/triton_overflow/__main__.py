"""``python -m triton_overflow``: the same as the ``triton-overflow`` command."""

import sys

from triton_overflow.cli import main

if __name__ == "__main__":
    sys.exit(main())
