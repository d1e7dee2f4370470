"""SQL over a trace's columns (DuckDB): ``sofa-gui sql`` and the app's Query dock.

:class:`~.db.TraceDB` opens the documented tables (:mod:`.schema`) over the trace's
Arrow / numpy columns without copying them, read-only (:mod:`.guard`). DuckDB is
imported only when a query runs, so other commands never load it.
"""
