"""``python -m sofa_gui`` is the ``sofa-gui`` command."""

from .cli import entry

entry()
