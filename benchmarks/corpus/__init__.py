"""Generators of the diagnosis corpus (tests/data/corpus): real captures with measured truth."""
