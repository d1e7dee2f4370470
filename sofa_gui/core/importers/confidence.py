"""How sure an importer is that it can read a path: a few named tiers, not bare floats.

``pick_importer`` asks every importer and takes the highest tier (ties: the order of
``IMPORTER_MODULES``). A new importer picks the tier that says what it checked.
"""

from __future__ import annotations

from enum import Enum


class Confidence(float, Enum):
    NO = 0.0  # not this format
    NAME_ONLY = 0.2  # only a generic name (``.json``, ``.pb``) suggests it; content unclear
    CONTAINER = 0.3  # the right container (JSON object, SQLite) but not recognised inside;
    # the importer's load() explains what is missing
    OWN_SUFFIX = 0.6  # a suffix only this tool writes, in a form we cannot read directly
    OWN_NAMES = 0.8  # a folder holding files named as this format names them
    CONTENT = 0.9  # the content shows the format (keys, schema, run layout)
    SIGNATURE = 0.95  # content and a name / key only this format has
    DECLARED = 1.0  # the data declares its format (a manifest)
