"""Concrete remedies per finding id, each declaring what it applies to.

Kept apart from the rules so the wording can be reviewed in one place.  Each text
names the API to change.  A :class:`Fix` says which framework, devices and modes it
fits and which run fact it changes (see :mod:`..run_facts`); :func:`choose_fixes`
drops the ones that contradict the run's facts and says why each kept one fits.
"""

from __future__ import annotations

from dataclasses import replace

from ..results import CONDITIONAL, Fix

_PT, _TF, _JAX, _ANY = "pytorch", "tensorflow", "jax", "any"
_GPU = ("cuda", "rocm")
_ACCEL = ("cuda", "rocm", "tpu")
_CPU = ("cpu",)
#: Precisions a run already computes in below fp32: no mixed-precision advice there.
_LOWER = ("low", "int8")
#: Precisions other than fp32: no mixed-precision advice there (a float64 model gets the
#: float32 fix first; autocast leaves float64 ops as they are).
_NOT_FP32 = (*_LOWER, "fp64")
#: Lower precision is faster on a CPU only with bf16 instructions; without them bf16 is
#: converted to fp32 and back around each op and runs slower than fp32 (run fact cpu_bf16).
_NATIVE_BF16 = (("cpu_bf16", ("native",)),)
_EMULATED_BF16 = (("cpu_bf16", ("emulated",)),)
#: How a fact a trace leaves unknown becomes known (said with a conditional fix).
PROVED_BY = {"cpu_bf16": "a `sofa-gui record` recording reads the CPU's flags"}
_TRAIN = ("training",)
#: Needs a PyTorch DataLoader in the trace (either kind).
_LOADER = (("dataloader", ("single_process", "workers")),)

FIXES: dict[str, list[Fix]] = {
    "input_pipeline_bound": [
        Fix(_PT, "Load batches in worker processes: DataLoader(num_workers=N) with N about the "
                 "number of free CPU cores, persistent_workers=True (no respawn each epoch) and "
                 "prefetch_factor=2..4 so batches are ready before the step asks for them.",
            fact="dataloader", unless=("workers",), needs=_LOADER, gain="cores",
            name="loader workers"),
        Fix(_PT, "Keep the loader's worker processes between epochs: DataLoader(..., "
                 "persistent_workers=True). With the default persistent_workers=False every "
                 "epoch's iter(loader) shuts the workers down, starts new ones and waits for "
                 "their first batches.", fact="dataloader", needs=(("dataloader", ("workers",)),),
            gain="restarts", name="persistent workers"),
        Fix(_PT, "Raise prefetch_factor and num_workers, or make each sample cheaper: the "
                 "workers exist but do not keep up.", fact="dataloader",
            unless=("single_process",), needs=_LOADER, gain="cores",
            name="more loader workers"),
        Fix(_PT, "DataLoader(pin_memory=True) and tensor.to(device, non_blocking=True) so the "
                 "host-to-device copy overlaps compute.", devices=_GPU,
            fact="host_copies", unless=("pinned",), needs=_LOADER, gain="none",
            name="pinned memory"),
        Fix(_PT, "Move decoding/augmentation to the GPU (torchvision.transforms.v2 on CUDA "
                 "tensors, NVIDIA DALI) or pre-process the dataset once and cache it.",
            devices=_GPU, gain="none", name="preprocessing on the GPU"),
        Fix(_ANY, "Pre-process the dataset once (decoded, augmented offline) and cache it, so "
                  "the step only reads ready tensors.", gain="removes",
            name="cache pre-processed data"),
        Fix(_TF, "Move the Python preprocessing into tf.data ops: read with "
                 "from_tensor_slices / TFRecordDataset and do the work in "
                 "dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE) with tf.image / tf.io ops "
                 "instead of from_generator / py_function; the GIL keeps Python input to about "
                 "one core.", fact="tf_data", unless=("tf_ops",), gain="cores",
            name="tf.data ops in parallel"),
        Fix(_TF, "Parallelise the slow stage: dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE)"
                 " (and .interleave(..., num_parallel_calls=tf.data.AUTOTUNE, "
                 "deterministic=False) when reading many files).", fact="tf_data_parallel",
            unless=("parallel", "python"), gain="cores", name="parallel map"),
        Fix(_TF, "End the pipeline with .prefetch(tf.data.AUTOTUNE) so the next batch is made "
                 "while the step runs.", fact="tf_data_prefetch", unless=("prefetch",),
            gain="core", name="prefetch"),
        Fix(_TF, "If the preprocessed elements fit in memory or on local disk, .cache() right "
                 "after the expensive map (before random augmentation): later epochs only "
                 "read them.", fact="tf_data_cache", unless=("cache",), gain="removes",
            name="cache"),
        Fix(_TF, "The pipeline already runs in parallel and still cannot keep up: make each "
                 "sample cheaper (preprocess offline into TFRecords of decoded, resized "
                 "examples; smaller images; vectorise per-sample ops with .batch() before "
                 ".map()), or give it more CPU (more cores, or tf.data service: "
                 "dataset.apply(tf.data.experimental.service.distribute(...)) on other hosts).",
            fact="tf_data_parallel", unless=("serial", "python"), gain="removes",
            name="cheaper samples"),
        Fix(_JAX, "Feed batches from a background thread (flax.jax_utils.prefetch_to_device or "
                  "a grain pipeline) so the next batch is on device before the jitted step "
                  "returns.", gain="core", name="background prefetch"),
        Fix(_JAX, "Stack the samples in numpy and convert the batch once: "
                  "jnp.asarray(np.stack(images)) instead of jnp.array(images); jnp.array of a "
                  "Python list checks every element's dtype and shape in Python.",
            gain="list_conversion", name="one conversion per batch"),
    ],
    "host_device_copy_bound": [
        Fix(_PT, "Copy from pinned memory: tensor.pin_memory() (or pin_memory=True in the loader); "
                 "pageable copies are staged and blocking, pinned ones run at full PCIe/NVLink "
                 "speed and can be asynchronous.", devices=_GPU, fact="host_copies",
            unless=("pinned",)),
        Fix(_PT, "Use tensor.to(device, non_blocking=True) and keep the data on the device "
                 "between steps (no .cpu()/.numpy() round trips of activations or metrics).",
            devices=_GPU),
        Fix(_ANY, "Batch many small copies into one large copy (concatenate, then copy once); "
                  "small copies never reach peak bandwidth."),
        Fix(_TF, "Keep tensors on device: avoid .numpy() inside the step; use "
                 "tf.data.experimental.prefetch_to_device for whole batches."),
        Fix(_JAX, "Keep arrays on device: avoid np.asarray() inside the step; jax.device_put "
                  "whole batches ahead of the step."),
    ],
    "launch_overhead_bound": [
        Fix(_PT, "Capture the step with CUDA Graphs (torch.compile(mode=\"reduce-overhead\"), "
                 "or torch.cuda.CUDAGraph with torch.cuda.graph(...) / "
                 "torch.cuda.make_graphed_callables) so one launch replays all kernels.",
            devices=_GPU, fact="compiled", unless=("cuda_graphs",)),
        Fix(_PT, "Fuse small ops: torch.compile(model).", fact="compiled",
            unless=("torch.compile", "cuda_graphs")),
        Fix(_PT, "Use a foreach/fused optimizer (torch.optim.AdamW(..., fused=True) or "
                 "foreach=True): one launch per parameter group instead of per tensor.",
            modes=_TRAIN, fact="optimizer", unless=("fused", "foreach")),
        Fix(_PT, "The optimizer already runs foreach: use the fused implementation "
                 "(torch.optim.AdamW(..., fused=True)): one kernel per parameter group.",
            modes=_TRAIN, fact="optimizer", unless=("fused",),
            needs=(("optimizer", ("foreach",)),)),
        Fix(_ANY, "Give each kernel more work: larger batch size, or fewer/larger layers, so "
                  "launch cost is small next to kernel time."),
        Fix(_TF, "Compile the step with XLA: @tf.function(jit_compile=True) so ops fuse into "
                 "few large kernels.", fact="compiled", unless=("xla",)),
        Fix(_JAX, "jax.jit the whole step (not per-layer functions) so XLA fuses it into a few "
                  "kernels.", fact="compiled", unless=("xla",)),
    ],
    "sequence_loop": [
        Fix(_PT, "Call the module once over the whole sequence instead of once per position: "
                 "a recurrent cell called per time step on inputs known in advance (teacher "
                 "forcing) becomes one nn.LSTM / nn.GRU / nn.RNN over the sequence "
                 "(batch_first=True, the cell's weight_ih / weight_hh / bias_ih / bias_hh as "
                 "its weight_ih_l0 / weight_hh_l0 / bias_ih_l0 / bias_hh_l0); a layer applied "
                 "to x[:, t] for each t is applied to x itself (nn.Linear and the elementwise "
                 "layers take any leading dimensions; fold the positions into the batch with "
                 "x.reshape(-1, features) for the others).", name="one call over the sequence"),
    ],
    "op_overhead_bound": [
        Fix(_ANY, "Batch the requests: stack many inputs into one call (one forward pass on "
                  "a batch of N instead of N passes on one; a dynamic batcher in a server), so "
                  "the fixed cost of each call is paid once per batch.", modes=("inference",)),
        Fix(_PT, "Use the fused optimizer implementation: torch.optim.AdamW(..., fused=True) "
                 "(Adam, SGD and Adagrad take fused=True too) updates every parameter of a "
                 "group in one op a step instead of a few tiny ops (add_, mul_, addcdiv_, "
                 "sqrt) per parameter tensor. On a CPU foreach=True keeps those ops' cost.",
            modes=_TRAIN, fact="optimizer", unless=("fused",), gain="removes",
            name="fused optimizer"),
        Fix(_PT, "Or torch.optim.AdamW(..., foreach=True), for an optimizer without a fused "
                 "implementation too: one launch per op and parameter group instead of per "
                 "tensor.", devices=_GPU, modes=_TRAIN, fact="optimizer",
            unless=("fused", "foreach"), name="foreach optimizer"),
        Fix(_PT, "Give the L2 penalty to the optimizer: torch.optim.SGD(..., weight_decay=2 * "
                 "l2_lambda) (Adam's weight_decay too; AdamW's is decoupled, a different "
                 "update) instead of adding l2_lambda * sum(p.pow(2).sum() for p in "
                 "model.parameters()) to the loss: the same update inside the optimizer's "
                 "step, without a pow, a sum and an add per parameter tensor and their "
                 "backward.", modes=_TRAIN, gain="removes", name="weight decay in the optimizer"),
        Fix(_PT, "Replace the many tiny ops by few large ones: batch the per-item loop into one "
                 "tensor op (stack the small matrices and use one bmm / one nn.Linear), or "
                 "torch.compile(model) to fuse them.", fact="compiled",
            unless=("torch.compile",), name="batch or compile the model"),
        Fix(_PT, "Capture the step with CUDA Graphs (torch.compile(mode=\"reduce-overhead\")) so "
                 "per-op dispatch runs once.", devices=_GPU, fact="compiled",
            unless=("cuda_graphs",)),
        Fix(_ANY, "Give each op more work (larger batch, fewer larger layers): the fixed cost "
                  "per op (dispatch, Python, allocation) then matters less.",
            name="more work per op"),
        Fix(_TF, "Run the step as a graph: wrap it (or the model's call) in tf.function, so "
                 "its ops run in TensorFlow's graph executor instead of one Python dispatch "
                 "each (Keras fit / predict: keep run_eagerly=False, the default); "
                 "tf.function(jit_compile=True) also fuses them with XLA.",
            fact="compiled", unless=("xla",), name="tf.function"),
        Fix(_JAX, "jax.jit the whole step so the ops fuse.", fact="compiled", unless=("xla",)),
        Fix(_JAX, "jit the update with the gradient in one step: one jax.jit function that "
                  "computes the gradient and applies the optimizer's update (the optimizer "
                  "state passed in and returned, a step count as a traced array), instead of "
                  "the update's jax.numpy calls per parameter array, each a dispatch of its "
                  "own.", modes=_TRAIN, excludes=(("compiled", ("op by op",)),),
            name="jit the update with the step"),
    ],
    "anomaly_detection_on": [
        Fix(_PT, "Turn anomaly detection off: torch.autograd.set_detect_anomaly(False), or "
                 "leave out the torch.autograd.detect_anomaly() block (it is a debugging "
                 "mode: every forward op stores its Python stack and every backward output "
                 "is checked for NaN). To catch a NaN cheaply keep a "
                 "torch.isfinite(loss).all() check every N steps, or turn the mode on only "
                 "to find where the NaN starts.", fact="anomaly_detection",
            needs=(("anomaly_detection", ("on",)),), gain="removes",
            name="anomaly detection off"),
    ],
    "eager_input_bound": [
        Fix(_JAX, "Compile and vectorise the batch's preparation: jax.jit(jax.vmap(augment)) "
                  "called once per batch (random keys split per sample outside it) instead of "
                  "the augmentation's jax.numpy calls per sample, each a dispatch of its own.",
            name="jit and vmap the preparation"),
        Fix(_ANY, "Or prepare the batches off the loop's thread (numpy in loader worker "
                  "processes or a background thread) and hand the compiled step finished "
                  "arrays.", name="prepare in the loader"),
    ],
    "call_overhead_bound": [
        Fix(_JAX, "Batch the loop's items into one call: stack what differs per item (an "
                  "ensemble's parameters, the samples) and call jax.jit(jax.vmap(f, "
                  "in_axes=...)) once a step, reading all the results with one np.asarray "
                  "after it, so the dispatch and the hand-back are paid once for all items.",
            name="one call over the items"),
        Fix(_JAX, "Run several steps in one jitted call: jax.lax.scan the step over a stack of "
                  "N batches held on the device (and read their losses once), so the call's "
                  "dispatch and the result's hand-back are paid once per N steps.",
            name="several steps per call"),
        Fix(_TF, "Run several steps per call: Keras model.compile(..., steps_per_execution=N), "
                 "or a loop over N batches inside the tf.function, so each call's fixed cost "
                 "is paid once per N steps.", name="several steps per call"),
        Fix(_ANY, "Give each call more work (a larger batch): the fixed cost per call then "
                  "matters less beside the program's work.", name="more work per call"),
    ],
    "wrapper_overhead_bound": [
        Fix(_JAX, "Call a plain jax.jit of a pure function, so each step is one call on the "
                  "C++ fast path with no Python around it: with Flax NNX, nnx.split the model "
                  "and optimizer once before the loop, jit a step over (graphdef, state) that "
                  "merges them inside (nnx.merge) and returns nnx.split of the updated ones, "
                  "and merge once after the loop; with Equinox, eqx.partition the module once "
                  "and jit over its arrays.", name="jit a pure function"),
        Fix(_ANY, "Move the Python around the call out of the step: prepare once before "
                  "the loop what does not change between steps, and do the rest inside the "
                  "compiled function.", name="Python out of the step"),
    ],
    "setup_overhead_bound": [
        Fix(_TF, "Call model.predict / evaluate / fit once on many samples (stack the "
                 "requests into one array, or one tf.data pipeline made once and iterated), "
                 "or call the model directly for a few (model(x, training=False) inside a "
                 "tf.function made once): each high-level call builds its own input pipeline "
                 "and iterator and looks up its step function."),
        Fix(_ANY, "Batch the requests: stack many inputs into one call, so the per-call "
                  "set-up is paid once per batch.", modes=("inference",)),
        Fix(_TF, "Keep tf.function input signatures stable (input_signature=..., "
                 "reduce_retracing=True) so a step is traced once, not on every call."),
    ],
    "memory_copy_bound": [
        Fix(_PT, "Stop re-laying out tensors every step: make the data once in the layout the "
                 "model reads (x.to(memory_format=torch.channels_last) once, or permute the "
                 "weights instead of the batch), use views (slicing, .view, .expand) instead "
                 "of .contiguous() / .clone(), and write pieces into one preallocated tensor "
                 "(out[:, a:b] = piece) instead of torch.cat every step."),
        Fix("tensorflow/jax", "Keep large arrays in the layout the model reads: do the "
                              "transpose / concatenate inside the compiled step, where XLA "
                              "fuses it into its consumer, or once before the loop."),
        Fix(_ANY, "Move copies that do not change between steps out of the loop (copy once, "
                  "reuse the result); copy only the slice the step reads."),
        Fix(_JAX, "Donate the arrays the step updates: jax.jit(step, donate_argnums=(0,)) "
                  "(the parameters, tables or optimizer state passed in and returned), so an "
                  "in-place update (x.at[i].add(...), a dynamic update) writes into the "
                  "argument's buffer instead of a whole copy of it every call; do not use the "
                  "donated array after the call.", name="donate the updated arrays"),
    ],
    "host_reads_in_loop": [
        Fix(_PT, "Keep the per-item values as tensors: replace the loop of .item() / .cpu() / "
                 ".tolist() by one vectorised op on the whole batch and read one result "
                 "(or read metrics every N steps)."),
        Fix(_PT, "torch.cuda.set_sync_debug_mode(\"warn\") reports each hidden device read.",
            devices=_GPU),
        Fix(_TF, "Do not call .numpy() / float() / int() on single elements in a Python loop; "
                 "compute on the whole tensor and fetch once."),
        Fix(_JAX, "Do not call float() / int() / .item() on single elements in a Python loop; "
                  "compute on the whole array and fetch once (jax.device_get)."),
    ],
    "synchronization_stalls": [
        Fix(_PT, "Remove host syncs from the loop: no loss.item(), tensor.cpu(), print(tensor) or "
                 "torch.cuda.synchronize() every step; accumulate metrics on the GPU and read "
                 "them every N steps.", devices=_GPU),
        Fix(_PT, "Avoid ops whose output size depends on data (torch.nonzero, boolean masks, "
                 ".tolist()); torch.cuda.set_sync_debug_mode(\"warn\") reports each hidden sync.",
            devices=_GPU),
        Fix(_TF, "Do not call .numpy() / float() on step outputs every step; log "
                 "asynchronously."),
        Fix(_JAX, "Avoid block_until_ready() and host callbacks in the loop; log "
                  "asynchronously (jax.debug.callback with ordered=False) every N steps."),
    ],
    "host_callback_round_trip": [
        Fix(_JAX, "Return the metrics from the jitted step (accumulate them on the device) and "
                  "read them every N steps with jax.device_get instead of a jax.debug.callback "
                  "per step; the step then takes JAX's C++ dispatch fast path."),
        Fix(_JAX, "Where the order of the calls does not matter, use io_callback / "
                  "jax.debug.callback with ordered=False, so the host call does not serialise "
                  "the steps."),
    ],
    "host_callback_work": [
        Fix(_JAX, "Write the callback's work in jax.numpy inside the jitted step (a separable "
                  "filter as matrix products or jax.scipy.signal.convolve, NumPy calls as "
                  "their jnp counterparts), so the compiled program does it without stopping "
                  "for Python and copying its arguments to the host."),
        Fix(_JAX, "Where the work has no jax.numpy form, do it once in the input pipeline "
                  "(before the batch enters the step) rather than through jax.pure_callback "
                  "in every step."),
    ],
    "blocking_readback": [
        Fix(_PT, "Read the result back asynchronously: copy into a pinned buffer with "
                 "tensor.to(\"cpu\", non_blocking=True) and wait on a CUDA event only where the "
                 "value is needed, so the GPU keeps working meanwhile.", devices=_GPU),
        Fix(_PT, "Move the consumer of the read-back to the device (keep indices/lengths on the "
                 "GPU), or issue the read-back one step earlier so it overlaps the step's "
                 "compute.", devices=_GPU),
        Fix(_TF, "Fetch outputs with .numpy() one step later (double buffering), not right "
                 "after the step that produces them."),
        Fix(_JAX, "Fetch outputs with jax.device_get one step later (double buffering), not "
                  "right after the step that produces them."),
    ],
    "host_dispatch_bound": [
        Fix(_JAX, "The runtime threads dispatch and allocate per call: jit a larger function "
                  "(the whole step or a jax.lax.scan over several steps) so one dispatch does "
                  "more work."),
        Fix(_JAX, "Donate input buffers (jax.jit(..., donate_argnums=...)) so each call does not "
                  "allocate fresh device buffers; keep shapes static to avoid re-dispatch."),
        Fix(_TF, "Run several steps per tf.function call (steps_per_execution in Keras "
                 "compile) so host dispatch is amortised."),
    ],
    "gpu_idle_unexplained": [
        Fix(_PT, "The device waits with nothing in the trace explaining why: record the host "
                 "side too (torch.profiler with CPU activities and with_stack=True) to see "
                 "what the program does in these gaps."),
        Fix(_ANY, "The device waits with nothing in the trace explaining why: record the "
                  "Python side too (sofa-gui record --py-spy) to see what the program does in "
                  "these gaps."),
        Fix(_ANY, "Look at the longest gaps below: a host phase not traced (Python, I/O, "
                  "another process) or waits on other ranks show up there."),
    ],
    "communication_bound": [
        Fix(_PT, "Overlap gradient all-reduce with backward: DistributedDataParallel with a "
                 "tuned bucket_cap_mb (e.g. 25 -> 50..100 MB); FSDP with backward_prefetch.",
            modes=_TRAIN, gain="chain", name="bucket size"),
        Fix(_PT, "DistributedDataParallel(..., gradient_as_bucket_view=True): the gradients "
                 "are views of the buckets, so the reduced buckets are not copied back.",
            modes=_TRAIN),
        Fix(_PT, "Communicate less often or less: gradient accumulation with model.no_sync(), "
                 "DDP communication hooks for FP16/BF16 or PowerSGD compression.",
            modes=_TRAIN),
        Fix(_ANY, "Gather results less often: keep each batch's predictions, labels or metric "
                  "counts on its rank and gather or reduce them once a pass (or every few "
                  "hundred batches), one collective of the pass's tensors instead of one a "
                  "batch.", modes=("inference",), name="gather less often"),
        Fix(_ANY, "Check the interconnect: NCCL/RCCL over NVLink/xGMI/InfiniBand rather than TCP "
                  "(NCCL_DEBUG=INFO shows the transport); place ranks to match the topology."),
        Fix(_TF, "tf.distribute: MultiWorkerMirroredStrategy with "
                 "CommunicationOptions(bytes_per_pack=..., implementation=NCCL)."),
        Fix(_JAX, "Shard with jax.jit in/out shardings or shard_map so XLA schedules "
                  "collectives to overlap compute."),
    ],
    "compute_bound": [
        Fix(_PT, "Use mixed precision so matmuls/convolutions run on tensor cores: "
                 "torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16) (or float16 with "
                 "GradScaler); channels_last for CNNs.", devices=_GPU, fact="precision",
            unless=_NOT_FP32),
        Fix(_PT, "torch.backends.cudnn.benchmark=True for fixed input shapes (cuDNN picks the "
                 "fastest convolution).", devices=_GPU),
        Fix(_PT, "On the CPU: torch.autocast(device_type=\"cpu\", dtype=torch.bfloat16) around "
                 "the forward pass: a CPU with bf16 instructions (AVX512-BF16, AMX) runs "
                 "matmuls and convolutions faster in bf16 than in fp32.", devices=_CPU,
            fact="precision", unless=_NOT_FP32, assumes=_NATIVE_BF16,
            name="bf16 autocast on the CPU"),
        Fix(_ANY, "Compute in fp32 (CPU autocast / the bf16 policy off) on a CPU without bf16 "
                  "instructions (AVX512-BF16, AMX): there bf16 math is converted to fp32 and "
                  "back around every op, slower than fp32 itself.", devices=_CPU,
            fact="precision", needs=(("precision", ("low",)),), assumes=_EMULATED_BF16,
            name="fp32 on the CPU"),
        Fix(_PT, "Compute in float32: the model's matmuls and convolutions take float64 "
                 "inputs (a model turned .double(), or float64 NumPy arrays converted as "
                 "they are), and float64 runs at about half the float32 rate on a CPU: "
                 "model.float(), and the batches cast once with torch.from_numpy(x).float() "
                 "or x.astype(np.float32).",
            fact="precision", needs=(("precision", ("fp64",)),), gain="removes",
            name="float32 instead of float64"),
        Fix(_PT, "Run the forward under torch.inference_mode() (or torch.no_grad()): with "
                 "grad mode on, autograd records every op that takes a parameter (a graph "
                 "node, the tensors kept for a backward that never runs), and modules with a "
                 "fused inference path (nn.TransformerEncoderLayer, nn.MultiheadAttention) "
                 "take their general one.", modes=("inference",), fact="grad_mode",
            needs=(("grad_mode", ("recorded",)),), gain="removes", name="inference mode"),
        Fix(_PT, "On the CPU: torch.set_num_threads(physical cores) for intra-op parallelism.",
            devices=("cpu",), name="more intra-op threads"),
        Fix(_PT, "Fuse kernels with torch.compile(model) and use fused implementations "
                 "(scaled_dot_product_attention).", fact="compiled",
            unless=("torch.compile",)),
        Fix(_TF, "tf.keras.mixed_precision.set_global_policy(\"mixed_bfloat16\") on GPUs "
                 "and TPUs.", devices=_ACCEL, fact="precision", unless=_NOT_FP32),
        Fix(_TF, "tf.keras.mixed_precision.set_global_policy(\"mixed_bfloat16\"): a CPU with "
                 "bf16 instructions (AVX512-BF16, AMX) computes faster in bf16.", devices=_CPU,
            fact="precision", unless=_NOT_FP32, assumes=_NATIVE_BF16,
            name="bf16 policy on the CPU"),
        Fix(_TF, "Compile the step with XLA: @tf.function(jit_compile=True) (or "
                 "model.compile(jit_compile=True)) fuses its ops.", fact="compiled",
            unless=("xla",)),
        Fix(_JAX, "jax.jit the whole train step (not per-layer functions) so XLA fuses it.",
            fact="compiled", unless=("xla",)),
        Fix(_JAX, "bfloat16 parameters/activations (jnp.bfloat16) for matmuls/convolutions.",
            devices=_ACCEL, fact="precision", unless=_NOT_FP32),
        Fix(_JAX, "bfloat16 parameters/activations (jnp.bfloat16) for matmuls/convolutions: a "
                  "CPU with bf16 instructions (AVX512-BF16, AMX) computes faster in bf16.",
            devices=_CPU, fact="precision", unless=_NOT_FP32, assumes=_NATIVE_BF16,
            name="bf16 arrays on the CPU"),
        Fix(_ANY, "Then profile the top kernels themselves (Nsight Compute / rocprof) or scale "
                  "out: the device is the bottleneck, which is where a well-fed job should be.",
            devices=_GPU),
    ],
    "iteration_jitter": [
        Fix(_ANY, "Look at the slow iterations: Python GC (gc.freeze() after setup, "
                  "gc.disable() with manual gc.collect() between epochs), other processes."),
        Fix(_PT, "DataLoader workers falling behind now and then: raise prefetch_factor / "
                 "num_workers.", needs=(("dataloader", ("workers",)),)),
        Fix(_PT, "Stragglers in multi-rank runs: balance the data per rank (bucket by sequence "
                 "length), check thermal/clock throttling and noisy neighbours on the slow rank.",
            fact="ranks", unless=(1,)),
        Fix(_TF, "Keep tf.data autotuning stable with a fixed ram_budget and prefetch.",
            needs=(("tf_data", ("python", "tf_ops")),)),
        Fix(_JAX, "Keep shapes static so no step recompiles under jax.jit."),
    ],
    "startup_cost": [
        Fix(_ANY, "One-off work, not a per-step cost: start measuring after the first steps; "
                  "it only matters for short jobs."),
        Fix(_PT, "Profile the steady state only: torch.profiler.schedule(wait=1, warmup=1, "
                 "active=N)."),
        Fix(_TF, "Profile the steady state only: start tf.profiler after a warm-up call."),
        Fix(_JAX, "Profile the steady state only: start jax.profiler after a warm-up call."),
        Fix(_PT, "If start-up matters (short jobs, serving): cache compiled kernels "
                 "(TORCHINDUCTOR_CACHE_DIR / torch.compile mode=\"max-autotune-no-cudagraphs\" "
                 "off), set torch.backends.cudnn.benchmark only for fixed shapes, and create the "
                 "CUDA context early.", devices=_GPU),
        Fix(_JAX, "If start-up matters: persist compiled executables "
                  "(jax.config.update(\"jax_compilation_cache_dir\", ...)) and keep shapes "
                  "static so each function compiles once."),
        Fix(_TF, "If start-up matters: warm the tf.function up with the final shapes (an "
                 "input_signature avoids retracing)."),
    ],
    "recompile": [
        Fix(_JAX, "Keep the shapes fixed so jax.jit compiles the step once: pad every batch to "
                  "one length (with a mask), or bucket lengths to a few sizes (a few "
                  "compilations, each reused); pass values that change every step as arrays, "
                  "not static arguments."),
        Fix(_JAX, "Make the jitted function once, before the loop: jax.jit of a lambda or of "
                  "a function defined inside the loop is a new function every step, compiled "
                  "again even for the same shapes; jit the step once and pass what changes "
                  "(a learning rate) as an argument.", name="jit once before the loop"),
        Fix(_PT, "Mark the varying dimension dynamic so one graph serves every size: "
                 "torch.compile(model, dynamic=True) or torch._dynamo.mark_dynamic(x, dim) "
                 "before the call; or pad / bucket the inputs to a few shapes."),
        Fix(_TF, "Pass values that change every step (a learning rate, a step count) as "
                 "tensors or a tf.Variable, not Python numbers: each new Python value traces "
                 "a new graph. Give the tf.function an input_signature with None for a varying "
                 "dimension (or reduce_retracing=True), or pad / bucket the inputs to a few "
                 "shapes, so it traces once."),
        Fix(_TF, "Make the tf.function once (when the model is loaded, or before the loop): "
                 "a tf.function defined inside a handler or a step function is a new function "
                 "on every call, traced again whatever its inputs.",
            name="tf.function made once"),
    ],
    "periodic_extra": [
        Fix(_PT, "Checkpoint asynchronously (torch.distributed.checkpoint.async_save, or copy "
                 "the state_dict to CPU and write it from a thread) or less often.",
            modes=_TRAIN),
        Fix(_ANY, "Run evaluation / logging less often, or overlap it with training (a separate "
                  "process or stream); batch the logging writes."),
        Fix(_TF, "Save with tf.train.CheckpointManager less often, or from a thread."),
        Fix(_JAX, "Save with orbax's CheckpointManager in async mode, less often."),
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
                 "tf.data's (options.threading.private_threadpool_size) to the cores you own."),
        Fix(_JAX, "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false on shared hosts."),
    ],
    "cpu_bound": [
        Fix(_PT, "Spread the host work over processes: DataLoader(num_workers=N, "
                 "persistent_workers=True) for loading and augmentation; the Python GIL keeps "
                 "one process to about one core.", fact="dataloader", unless=("workers",),
            needs=_LOADER),
        Fix(_PT, "Vectorise the Python loop (torch/numpy ops on whole batches instead of "
                 "per-sample Python), raise torch.set_num_threads for CPU ops, or move the work "
                 "to the GPU."),
        Fix(_TF, "tf.data: map(..., num_parallel_calls=tf.data.AUTOTUNE) and interleave to use "
                 "all cores.", needs=(("tf_data", ("python", "tf_ops")),)),
        Fix(_JAX, "jit the per-sample Python into one compiled function, or feed it from a "
                  "multi-process loader (grain)."),
        Fix(_ANY, "Profile the hot thread (py-spy record --native, perf) to see which "
                  "function holds the core."),
    ],
}

_FW_ORDER = ("pytorch", "tensorflow", "jax")


def choose_fixes(fixes: list[Fix], facts, all_frameworks: bool = False
                 ) -> tuple[list[Fix], list[tuple[Fix, str]]]:
    """(shown, hidden with the reason): a fix is hidden when a known fact contradicts it
    (other framework, device or mode; the fact it changes already has the fixed value).
    Shown fixes say which fact makes them fit; the run's framework comes first."""
    shown, hidden = [], []
    fw = facts.get("framework")
    for fix in fixes:
        why = _contradiction(fix, facts, fw, all_frameworks) or _unmet(fix, facts)
        if why:
            hidden.append((fix, why))
        else:
            shown.append(_fitted(fix, facts))
    if fw.known:
        shown.sort(key=lambda f: 0 if fw.value in f.framework.split("/") else 1)
    else:
        shown.sort(key=lambda f: next((k for k, x in enumerate(_FW_ORDER)
                                       if x in f.framework.split("/")), len(_FW_ORDER)))
    return shown, hidden


def _contradiction(fix: Fix, facts, fw, all_frameworks: bool) -> str:
    if fw.known and not all_frameworks and fix.framework != "any" \
            and fw.value not in fix.framework.split("/"):
        return f"for {fix.framework}; this run is {fw.value} ({fw.proof})"
    for key, allowed in (("device", fix.devices), ("mode", fix.modes)):
        f = facts.get(key)
        if allowed and f.known and f.value not in allowed:
            return f"for {'/'.join(allowed)}; this run's {key} is {f.value} ({f.proof})"
    if fix.fact:
        f = facts.get(fix.fact)
        if f.known and f.value in fix.unless:
            return f"already done: {fix.fact} is {f.value} here ({f.proof})"
    return ""


def _unmet(fix: Fix, facts) -> str:
    """Why a fix's declared needs / exclusions rule it out here ("" when they do not)."""
    for key, allowed in fix.needs:
        f = facts.get(key)
        if not f.known:
            return f"needs {key} ({'/'.join(map(str, allowed))}); the trace shows none"
        if f.value not in allowed:
            return f"needs {key} {'/'.join(map(str, allowed))}; here {f.value} ({f.proof})"
    for key, values in fix.excludes:
        f = facts.get(key)
        if f.known and f.value in values:
            return f"ruled out: {key} is {f.value} here ({f.proof})"
    for key, allowed in fix.assumes:
        f = facts.get(key)
        if f.known and f.value not in allowed:
            return f"pays off only where {key} is {'/'.join(allowed)}; here {f.value} ({f.proof})"
    return ""


def _fitted(fix: Fix, facts) -> Fix:
    """The shown fix with the facts that make it fit; one whose assumed fact the trace
    leaves unknown is stated as that condition and claims no speed-up."""
    unknown = [(k, allowed) for k, allowed in fix.assumes if not facts.get(k).known]
    if not unknown:
        said = [_because(fix, facts)] + [f"{k} is {facts.get(k).said()}" for k, _ in fix.assumes]
        return replace(fix, because="; ".join(w for w in said if w))
    cond = " and ".join(f"{k} is {'/'.join(allowed)}" for k, allowed in unknown)
    how = "; ".join(PROVED_BY[k] for k, _ in unknown if k in PROVED_BY)
    return replace(fix, because=f"only if {cond}: the trace does not say" + (
        f" ({how})" if how else ""), gain=CONDITIONAL, estimate=None,
        estimate_why=f"whether it helps depends on {', '.join(k for k, _ in unknown)}, "
                     f"unknown here")


def _because(fix: Fix, facts) -> str:
    if not fix.fact:
        return ""
    f = facts.get(fix.fact)
    if not f.known:
        return f"{fix.fact} unknown: the trace does not say"
    what = f.detail or f"{fix.fact} is {f.value}"
    return f"{what} here: {f.proof}" if f.proof else f"{what} here"


#: The compute finding's fix where image augmentation runs inside the training step
#: (shown by :mod:`.augment_layers` with its estimate, only where the trace shows it).
AUGMENT_FIX = Fix(_TF, "Run the augmentation in the input pipeline, not in the model: "
                       "ds.map(lambda x, y: (augment(x, training=True), y), "
                       "num_parallel_calls=tf.data.AUTOTUNE) before .prefetch(tf.data.AUTOTUNE), "
                       "and the model without its augmentation layers: tf.data's threads then "
                       "augment the next batches while the step trains.",
                  devices=_CPU, modes=_TRAIN, gain="cores",
                  name="augmentation in the input pipeline")
