"""Qt-free core: trace model, importers, cache and analyses (numpy/pyarrow only)."""
