"""``manifest.json``: what was run, where, on what, and what was (not) recorded and why.

Written when the recording starts (``status: "running"``) and rewritten when it
ends (``"complete"``), each time under a temporary name then renamed, so the
file on disk is always whole. A folder whose manifest still says ``running``
was left by a recorder that was killed; its data is readable up to the last
flush.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import sys
from pathlib import Path

from .. import __version__
from ..core.importers.recording.contract import FORMAT_NAME, FORMAT_VERSION, MANIFEST

#: Environment variables worth knowing when reading a profile (values kept).
_ENV_PREFIXES = ("CUDA_", "NCCL_", "OMP_", "MKL_", "OPENBLAS_", "TORCH_", "PYTORCH_", "XLA_",
                 "TF_CPP_", "TF_GPU_", "TF_XLA_", "TF_ENABLE_", "TF_FORCE_", "JAX_", "HIP_",
                 "ROCR_", "HSA_", "NVIDIA_", "KMP_", "SLURM_")
_ENV_NAMES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "VIRTUAL_ENV", "CONDA_DEFAULT_ENV", "PYTHONPATH", "LD_PRELOAD",
              "PYTHONUNBUFFERED", "PYTHONHASHSEED"}
_SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|(^|_)KEY($|_)|AUTH", re.I)


def iso(epoch_ns: int | None) -> str | None:
    """Local time with offset, to the microsecond, for humans reading the manifest."""
    if epoch_ns is None:
        return None
    return _dt.datetime.fromtimestamp(epoch_ns / 1e9).astimezone().isoformat(
        timespec="microseconds")


def time_doc(epoch_ns: int | None) -> dict | None:
    return None if epoch_ns is None else {"epoch_ns": int(epoch_ns), "iso": iso(epoch_ns)}


def environment_summary(child_env: dict[str, str], added: dict[str, str]) -> dict:
    """The recorder's Python and the child's performance-relevant variables (no secrets)."""
    picked = picked_variables(child_env)
    return {
        "recorder_python": sys.version.split()[0],
        "recorder_executable": sys.executable,
        "platform": platform.platform(),
        "variables": picked,
        "set_by_recorder": dict(sorted(added.items())),
    }


def picked_variables(env: dict[str, str], keep: tuple[str, ...] = ()) -> dict[str, str]:
    """The performance-relevant variables of ``env`` (and those named in ``keep``), no
    secrets among the picked ones."""
    return {k: v for k, v in sorted(env.items())
            if k in keep or ((k in _ENV_NAMES or k.startswith(_ENV_PREFIXES))
                             and not _SECRET.search(k))}


def rerun_doc(command, cwd: str, environ: dict[str, str], keep: tuple[str, ...] = ()) -> dict:
    """What ``sofa-gui try`` needs to run the command again: the command, its working
    directory and the variables the user allowed (``record --keep-env``; the
    performance-relevant ones by default), none of the recorder's own."""
    env = {k: v for k, v in picked_variables(environ, keep).items()
           if not k.startswith("SOFA_GUI_")}
    return {"command": list(command), "cwd": cwd, "env": env}


def new_manifest(command, executable: str, cwd: str, environment: dict, host: dict,
                 clock: dict, config: dict) -> dict:
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "status": "running",
        "recorder": {"program": "sofa-gui record", "version": __version__, "pid": os.getpid(),
                     **config},
        "command": list(command),
        "executable": executable,
        "cwd": cwd,
        "environment": environment,
        "host": host,
        "clock": clock,
        "start": None,
        "end": None,
        "duration_s": None,
        "exit": None,
        "sources": {},
        "files": {},
        "notes": [],
    }


def write_manifest(folder: Path, doc: dict) -> None:
    path = Path(folder) / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, allow_nan=False, default=str)
        f.write("\n")
    os.replace(tmp, path)
