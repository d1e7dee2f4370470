"""Find bundled resources both in a source checkout and in an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent  # .../sofa_gui


def resources_dir() -> Path:
    """``sofa_gui/_resources`` when installed from a wheel, else the checkout's ``resources/``."""
    for cand in (_PKG / "_resources", _PKG.parent / "resources"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError("sofa_gui resources not found (broken install?)")


def resource_path(*parts: str) -> Path:
    return resources_dir().joinpath(*parts)


def demo_trace_path() -> Path:
    """The bundled real sample trace (ResNet-50, input-bound)."""
    return resource_path("samples", "resnet50_num_workers_0.pt.trace.json.gz")
