"""``python -m segiou.cli``: the ``segiou`` command."""

import sys

from segiou.cli import main

sys.exit(main())
