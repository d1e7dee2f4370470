"""Original SOFA log folders (``sofalog/`` with CSV tables)."""
