"""Which calls are one-off work by nature: compilation, context and allocator set-up,
autotuning.  Start-up is told apart from work that recurs by these names: a long first
step that compiles is start-up; one that only makes calls later steps make again is not."""

from __future__ import annotations

import re

#: Events that are one-off by nature (compile, context/allocator setup, autotuning).
ONE_OFF = re.compile(r"compile|Compile|cudaFree$|cudaMalloc|hipMalloc|hipFree$|cuModuleLoad|"
                     r"hipModuleLoad|cudnnFind|cudnn.*[Bb]enchmark|autotune|Autotune|"
                     r"cuCtxCreate|cudaDeviceGetStreamPriorityRange|DeviceMemAllocator::Alloc")
#: Spans of compile work: XLA's and TorchDynamo's compiles (not ``CompiledFunction`` or a
#: ``Torch-Compiled Region``: those run compiled code), JAX's lowering and tracing,
#: TensorFlow tracing a ``tf.function`` into a graph.
COMPILE = re.compile(r"[Cc]ompile(?!d)|^lower_sharding_computation|^lower_jaxpr|"
                     r"^trace_to_jaxpr|^dynamo$|^tf\.function-graph_building$")
#: A Python frame recorded by the profiler's Python tracer: ``path/file.py(NN): function``.
#: Only its function says what it does (``torch/_compile.py(22): inner`` is the wrapper
#: that keeps TorchDynamo out of a call and compiles nothing; a frame of
#: ``flashinfer/autotuner.py`` need not tune anything).
PY_FRAME = re.compile(r"^\S+\.py\(\d+\): (.+)$")


def frame_function(name: str) -> str:
    """What names the work of an event: a Python frame's function, else the name."""
    frame = PY_FRAME.match(name)
    return frame.group(1) if frame else name


def is_one_off(name: str) -> bool:
    """Whether ``name`` is one-off work by nature (:data:`ONE_OFF`): a Python frame by its
    function, not its file."""
    return bool(ONE_OFF.search(frame_function(name)))


def is_compile(name: str) -> bool:
    """Whether ``name`` is compile work: a Python frame by its function, not its file."""
    return bool(COMPILE.search(frame_function(name)))


def is_start_up(name: str) -> bool:
    """Whether ``name`` is work a program does once, at its start or when it compiles
    anew: one-off by nature or compile work."""
    return is_one_off(name) or is_compile(name)
