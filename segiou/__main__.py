"""``python -m segiou``: the ``segiou`` command."""

import sys

from segiou.cli import main

sys.exit(main())
