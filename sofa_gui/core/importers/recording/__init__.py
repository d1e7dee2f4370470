"""Recording folders written by ``sofa-gui record`` (manifest + Parquet parts + profiler files)."""
