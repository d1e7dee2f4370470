"""The application layer: what the window does, without Qt.

Opening a trace in a loader child (:mod:`.background_load`), the open and analyze
jobs a worker thread runs (:mod:`.jobs`), the fleet jobs for big rank folders
(:mod:`.fleet_jobs`) and the recent-files list (:mod:`.recent`). The Qt layer
(:mod:`sofa_gui.qt`) drives these and paints their results; keeping them Qt-free
lets a spawned loader child import them without PySide6 and lets tests run them
headless.
"""
