"""Concrete remedies per finding id, for PyTorch and for TensorFlow/JAX.

Kept apart from the rules so the wording can be reviewed (and translated) in one
place.  Each text names the API to change, not just the idea.
"""

from __future__ import annotations

from .results import Fix

_PT, _TF, _ANY = "pytorch", "tensorflow/jax", "any"

FIXES: dict[str, list[Fix]] = {
    "input_pipeline_bound": [
        Fix(_PT, "Load batches in worker processes: DataLoader(num_workers=N) with N about the "
                 "number of free CPU cores, persistent_workers=True (no respawn each epoch) and "
                 "prefetch_factor=2..4 so batches are ready before the step asks for them."),
        Fix(_PT, "DataLoader(pin_memory=True) and tensor.to(device, non_blocking=True) so the "
                 "host-to-device copy overlaps compute."),
        Fix(_PT, "Move decoding/augmentation to the GPU (torchvision.transforms.v2 on CUDA "
                 "tensors, NVIDIA DALI) or pre-process the dataset once and cache it."),
        Fix(_TF, "tf.data: dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE), "
                 ".interleave(..., num_parallel_calls=tf.data.AUTOTUNE), .cache() after "
                 "expensive loading and .prefetch(tf.data.AUTOTUNE) as the last step."),
        Fix(_TF, "JAX: feed batches from a background thread (e.g. flax.jax_utils.prefetch_to_"
                 "device or a tf.data/grain pipeline) so the next batch is on device before "
                 "the jitted step returns."),
    ],
    "host_device_copy_bound": [
        Fix(_PT, "Copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(); "
                 "pageable copies are staged and blocking, pinned ones run at full PCIe/NVLink "
                 "speed and can be asynchronous."),
        Fix(_PT, "Use tensor.to(device, non_blocking=True) and keep the data on the device "
                 "between steps (no .cpu()/.numpy() round trips of activations or metrics)."),
        Fix(_ANY, "Batch many small copies into one large copy (concatenate, then copy once); "
                  "small copies never reach peak bandwidth."),
        Fix(_TF, "Keep tensors on device: avoid .numpy() inside the step; use "
                 "tf.data.experimental.prefetch_to_device or jax.device_put of whole batches."),
    ],
    "launch_overhead_bound": [
        Fix(_PT, "Capture the step with CUDA Graphs (torch.compile(mode=\"reduce-overhead\"), "
                 "or torch.cuda.CUDAGraph with torch.cuda.graph(...) / "
                 "torch.cuda.make_graphed_callables) so one launch replays all kernels."),
        Fix(_PT, "Fuse small ops: torch.compile(model); use foreach/fused optimizers "
                 "(torch.optim.AdamW(..., fused=True) or foreach=True)."),
        Fix(_ANY, "Give each kernel more work: larger batch size, or fewer/larger layers, so "
                  "launch cost is small next to kernel time."),
        Fix(_TF, "Compile the step with XLA: @tf.function(jit_compile=True) or jax.jit over the "
                 "whole train step, so ops fuse into few large kernels."),
    ],
    "synchronization_stalls": [
        Fix(_PT, "Remove host syncs from the loop: no loss.item(), tensor.cpu(), print(tensor) or "
                 "torch.cuda.synchronize() every step; accumulate metrics on the GPU and read "
                 "them every N steps."),
        Fix(_PT, "Avoid ops whose output size depends on data (torch.nonzero, boolean masks, "
                 ".tolist()); torch.cuda.set_sync_debug_mode(\"warn\") reports each hidden sync."),
        Fix(_TF, "Do not call .numpy() / float() on step outputs every step; in JAX avoid "
                 "block_until_ready() and host callbacks in the loop, log asynchronously."),
    ],
    "communication_bound": [
        Fix(_PT, "Overlap gradient all-reduce with backward: DistributedDataParallel with a "
                 "tuned bucket_cap_mb (e.g. 25 -> 50..100 MB), gradient_as_bucket_view=True; "
                 "FSDP with backward_prefetch."),
        Fix(_PT, "Communicate less often or less: gradient accumulation with model.no_sync(), "
                 "DDP communication hooks for FP16/BF16 or PowerSGD compression."),
        Fix(_ANY, "Check the interconnect: NCCL over NVLink/InfiniBand rather than TCP "
                  "(NCCL_DEBUG=INFO shows the transport); place ranks to match the topology."),
        Fix(_TF, "tf.distribute: MultiWorkerMirroredStrategy with "
                 "CommunicationOptions(bytes_per_pack=..., implementation=NCCL); JAX: shard with "
                 "pjit/shard_map so XLA schedules collectives to overlap compute."),
    ],
    "compute_bound": [
        Fix(_PT, "Use mixed precision so matmuls/convolutions run on tensor cores: "
                 "torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16) (or float16 with "
                 "GradScaler); torch.backends.cudnn.benchmark=True; channels_last for CNNs."),
        Fix(_PT, "Fuse kernels with torch.compile(model) and use fused implementations "
                 "(scaled_dot_product_attention, fused optimizers)."),
        Fix(_TF, "tf.keras.mixed_precision.set_global_policy(\"mixed_bfloat16\") / "
                 "jnp.bfloat16 parameters; XLA compilation (jit_compile=True, jax.jit) for "
                 "fusion."),
        Fix(_ANY, "Then profile the top kernels themselves (Nsight Compute) or scale out: the "
                  "device is the bottleneck, which is where a well-fed job should be."),
    ],
    "iteration_jitter": [
        Fix(_PT, "Look at the slow iterations: Python GC (gc.freeze() after setup, "
                 "gc.disable() with manual gc.collect() between epochs), evaluation or "
                 "checkpoint steps inside the timed loop, DataLoader workers falling behind "
                 "(raise prefetch_factor / num_workers)."),
        Fix(_PT, "Stragglers in multi-rank runs: balance the data per rank (bucket by sequence "
                 "length), check thermal/clock throttling and noisy neighbours on the slow rank."),
        Fix(_TF, "Exclude compilation and evaluation from the measured steps (warm up the "
                 "jitted function first); keep tf.data autotuning stable with a fixed "
                 "ram_budget and prefetch."),
    ],
    "cpu_contention": [
        Fix(_ANY, "Run on a machine (or CPU set) of its own: other jobs hold the cores; check "
                  "them with top/htop, pin this job with taskset / cgroup cpusets or a "
                  "dedicated node in the scheduler (Slurm --exclusive, Kubernetes CPU requests "
                  "equal to limits)."),
        Fix(_PT, "Avoid oversubscribing the cores yourself: torch.set_num_threads(n) / "
                 "OMP_NUM_THREADS so intra-op threads x DataLoader workers x processes per "
                 "node stays at or below the core count."),
        Fix(_TF, "Bound TensorFlow's thread pools (tf.config.threading."
                 "set_intra_op_parallelism_threads / set_inter_op_parallelism_threads) and "
                 "tf.data's (options.threading.private_threadpool_size) to the cores you own; "
                 "JAX: XLA_FLAGS=--xla_cpu_multi_thread_eigen=false on shared hosts."),
    ],
    "cpu_bound": [
        Fix(_PT, "Spread the host work over processes: DataLoader(num_workers=N, "
                 "persistent_workers=True) for loading and augmentation; the Python GIL keeps "
                 "one process to about one core."),
        Fix(_PT, "Vectorise the Python loop (torch/numpy ops on whole batches instead of "
                 "per-sample Python), raise torch.set_num_threads for CPU ops, or move the work "
                 "to the GPU."),
        Fix(_TF, "tf.data: map(..., num_parallel_calls=tf.data.AUTOTUNE) and interleave to use "
                 "all cores; JAX: jit the per-sample Python into one compiled function, or "
                 "feed it from a multi-process loader (grain)."),
        Fix(_ANY, "Profile the hot thread (py-spy record --native, perf) to see which "
                  "function holds the core."),
    ],
}


def fixes_for(finding_id: str) -> list[Fix]:
    return list(FIXES.get(finding_id, []))
