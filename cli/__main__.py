"""``python -m pwcap.cli``: the ``pwcap`` program, where its script is not on the path."""

import sys

from . import entry

sys.exit(entry())
