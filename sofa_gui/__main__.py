"""``python -m sofa_gui`` is the ``sofa-gui`` command."""

import sys

from .cli import main

sys.exit(main())
