"""sofa_gui: desktop trace viewer and performance advisor for deep-learning programs.

Importing the package loads neither Qt nor pandas.
"""

__version__ = "0.1.0"
