"""Folder put first on the child's PYTHONPATH by ``record --torch``; see ``sitecustomize``."""

from pathlib import Path

SHIM_DIR = Path(__file__).resolve().parent
