"""Analyses over a :class:`~sofa_gui.core.trace.Trace`: iterations, breakdown, findings."""
