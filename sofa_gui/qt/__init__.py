"""Qt layer: main window, timeline, panels, workers.  Only ``cli`` imports it."""
