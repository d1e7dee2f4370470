"""Nsight Systems SQLite exports (``nsys export --type sqlite``)."""
