"""The timeline view: lanes of a trace on one time axis, smooth at 10M events.

``TimelineWidget`` is the widget; ``prepare(trace)`` builds its draw index and
may run in a worker thread (pass the result to ``set_trace``).
"""

from ...view.model import Prepared, prepare
from .widget import TimelineWidget

__all__ = ["Prepared", "TimelineWidget", "prepare"]
