"""Name-based classification shared by importers: collectives, copy directions, syncs."""

from __future__ import annotations

import re

from .trace import CopyKind, Kind

_COLLECTIVE = re.compile(
    r"nccl|rccl|allreduce|all_reduce|allgather|all_gather|reducescatter|reduce_scatter|"
    r"alltoall|all_to_all|broadcast|sendrecv|c10d::|gloo", re.IGNORECASE)
_COPY_PATTERNS = [
    (re.compile(r"HtoD|H2D|host.?to.?device", re.I), CopyKind.H2D),
    (re.compile(r"DtoH|D2H|device.?to.?host", re.I), CopyKind.D2H),
    (re.compile(r"PtoP|P2P|peer", re.I), CopyKind.P2P),
    (re.compile(r"DtoD|D2D|device.?to.?device", re.I), CopyKind.D2D),
]
_SYNC = re.compile(r"Synchronize|cudaStreamWaitEvent|hipStreamSynchronize|hipDeviceSynchronize|"
                   r"cudaEventSynchronize|\bsync\b", re.I)

#: Kineto / Chrome ``cat`` values (lower-cased) -> Kind, all schema generations.
CATEGORY_KIND = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cuda_sync": Kind.SYNC,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.ANNOTATION,
}


def is_collective(name: str) -> bool:
    """True for NCCL/RCCL/collective kernels and ops."""
    return bool(_COLLECTIVE.search(name))


def copy_kind_from_name(name: str) -> CopyKind:
    """Copy direction from names like ``Memcpy HtoD (Pageable -> Device)``."""
    for pat, kind in _COPY_PATTERNS:
        if pat.search(name):
            return kind
    return CopyKind.OTHER


def is_sync_call(name: str) -> bool:
    """Host API calls that block on the device (cudaDeviceSynchronize, stream/event syncs)."""
    return bool(_SYNC.search(name))


def kind_for(category: str, name: str) -> Kind:
    """Kind of a Chrome/Kineto event from its ``cat`` and name."""
    if name.startswith("ProfilerStep#"):
        return Kind.ANNOTATION
    kind = CATEGORY_KIND.get(category.lower(), Kind.OTHER)
    if kind == Kind.KERNEL and is_collective(name):
        return Kind.COMMUNICATION
    return kind
