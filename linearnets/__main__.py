"""``python -m linearnets``: see :mod:`linearnets.cli`."""
import sys

from .cli import main

sys.exit(main())
