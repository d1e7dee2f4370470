"""Held-out TensorFlow / Keras programs around evaluation and raw features, written and
first scored without looking at the advisor's rules (captured and measured by
``run_tf.py``): a per-segment report calling ``model.evaluate`` once per customer segment,
an evaluation job reading many small CSV files through ``interleave`` and parsing them line
by line, Keras ``fit`` of a model whose ``StringLookup`` and ``Hashing`` layers take the raw
string columns inside the model, and a GradientTape loop on length-bucketed batches whose
``tf.function`` is declared with ``reduce_retracing=True``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import TF, tape_step

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


# -- a per-segment report: model.evaluate once per segment -------------------------------------
SEGMENTS = 6


def churn_table(n: int = 3072, seed: int = 71):
    """Customer rows (40 standardised features), the region segment of each (6 of
    uneven size) and whether the customer left."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 40)).astype("float32")
    seg = rng.choice(SEGMENTS, n, p=np.linspace(1.0, 3.0, SEGMENTS) / 12.0)
    y = (x[:, :4].sum(1) + 0.5 * rng.standard_normal(n) > 0).astype("float32")
    return x, seg, y


def churn_scorer() -> tf.keras.Model:
    """The churn model under review: 40-256-128-1 MLP, sigmoid, compiled with the
    metrics the report shows."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([tf.keras.Input((40,)), L.Dense(256, activation="relu"),
                               L.Dense(128, activation="relu"),
                               L.Dense(1, activation="sigmoid")])
    net.compile(optimizer="adam", loss="binary_crossentropy",
                metrics=["accuracy", tf.keras.metrics.AUC(name="auc")])
    return net


def auc_of(y: np.ndarray, p: np.ndarray) -> float:
    """ROC AUC from the ranks of the scores (Mann-Whitney)."""
    ranks = np.empty(len(p))
    ranks[np.argsort(p)] = np.arange(1, len(p) + 1)
    pos = y > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1))


@case("tf_eval_per_segment_evaluate", "tensorflow", "inference", 2,
      {**TF, "mode": "inference", "keras_evaluate": True}, split="tuned", warmup=2,
      fix="one model.predict over all rows, the per-segment metrics in NumPy",
      share_from_fix="host_overhead",
      tags=["keras_evaluate", "python_loop", "metrics", "sliced_evaluation"])
def tf_eval_per_segment_evaluate(variant):
    """A fairness report of a churn model: for each of 6 customer regions (237 to 775
    rows of a 3,072-row table in memory) the script selects the region's rows with a NumPy
    mask and calls ``model.evaluate(x[mask], y[mask], batch_size=256, return_dict=True)``
    (loss, accuracy, AUC), so a report is 6 ``evaluate`` calls, each building its data
    adapter's ``tf.data`` pipeline, iterator and callbacks around one to four batches; the
    fix scores every row with one ``model.predict`` and computes each region's loss,
    accuracy and AUC from the scores in NumPy. A step is one report."""
    net = churn_scorer()
    x, seg, y = churn_table()
    masks = [seg == s for s in range(SEGMENTS)]

    def run(i):
        if variant == "fix":
            p = np.clip(net.predict(x, batch_size=256, verbose=0)[:, 0], 1e-7, 1 - 1e-7)
            out = {}
            for s, m in enumerate(masks):
                ys, ps = y[m], p[m]
                out[s] = {"loss": float(-np.mean(ys * np.log(ps) + (1 - ys) * np.log(1 - ps))),
                          "accuracy": float(np.mean((ps > 0.5) == (ys > 0.5))),
                          "auc": auc_of(ys, ps)}
            return out
        return {s: net.evaluate(x[m], y[m], batch_size=256, verbose=0, return_dict=True)
                for s, m in enumerate(masks)}
    return run


# -- an evaluation job over many small CSV files, parsed line by line --------------------------
CSV_COLUMNS, CSV_FILES, CSV_ROWS = 24, 96, 64
CSV_FOLDERS: list[Path] = []


def csv_folder() -> str:
    """``CSV_FILES`` small CSV files (a header, ``CSV_ROWS`` lines of 24 readings and a
    label), one per meter and day, written once per process."""
    if not CSV_FOLDERS:
        folder = Path(tempfile.mkdtemp(prefix="corpus-meters-"))
        rng = np.random.default_rng(72)
        head = ",".join([f"r{k}" for k in range(CSV_COLUMNS)] + ["fault"])
        for f in range(CSV_FILES):
            vals = rng.standard_normal((CSV_ROWS, CSV_COLUMNS))
            labels = (vals[:, :3].sum(1) > 1.0).astype(int)
            lines = [",".join(f"{v:.4f}" for v in row) + f",{lab}"
                     for row, lab in zip(vals, labels)]
            (folder / f"meter-{f:03d}.csv").write_text("\n".join([head, *lines]) + "\n")
        CSV_FOLDERS.append(folder)
    return str(CSV_FOLDERS[0] / "*.csv")


DEFAULTS = [[0.0]] * CSV_COLUMNS + [[0]]


def parse_line(line):
    """One CSV line: its 24 readings as a vector and the fault label."""
    cols = tf.io.decode_csv(line, DEFAULTS)
    return tf.stack(cols[:-1]), cols[-1]


def parse_lines(lines):
    """A batch of CSV lines parsed at once (the tf.data guide's batch-then-decode)."""
    cols = tf.io.decode_csv(lines, DEFAULTS)
    return tf.stack(cols[:-1], axis=1), cols[-1]


def meter_batches(variant: str) -> tf.data.Dataset:
    """The files listed, ``interleave``-d 8 at a time with parallel reads (header
    skipped), each line parsed by a parallel ``map``, batched 128 and prefetched
    (``fix``: batched first, each batch parsed with one ``decode_csv``)."""
    files = tf.data.Dataset.list_files(csv_folder(), shuffle=False)
    lines = files.interleave(lambda f: tf.data.TextLineDataset(f).skip(1), cycle_length=8,
                             num_parallel_calls=AUTOTUNE).repeat()
    if variant == "fix":
        return lines.batch(128).map(parse_lines, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
    return lines.map(parse_line, num_parallel_calls=AUTOTUNE).batch(128).prefetch(AUTOTUNE)


@case("tf_eval_interleave_csv_lines", "tensorflow", "inference", 5,
      {**TF, "mode": "inference", "tf_data": True, "tf_data_parallel": True,
       "tf_function": True}, split="holdout", warmup=4,
      fix="the lines batched first, each batch parsed with one tf.io.decode_csv",
      tags=["tf_data", "interleave", "csv", "evaluation", "metrics"])
def tf_eval_interleave_csv_lines(variant):
    """A nightly evaluation of a fault detector (an MLP 24-128-64-1) over the day's meter
    logs, 96 small CSV files of 64 lines: ``list_files``, ``interleave`` of
    ``TextLineDataset(f).skip(1)`` (8 files open at once, ``num_parallel_calls=AUTOTUNE``),
    each line parsed with ``tf.io.decode_csv`` in a parallel ``map``, batched 128 and
    prefetched; each batch scored in a ``tf.function`` that updates AUC, precision and
    recall metrics. The fix batches the lines before parsing them (one ``decode_csv`` per
    batch), as the tf.data CSV guide advises."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([tf.keras.Input((CSV_COLUMNS,)), L.Dense(128, activation="relu"),
                               L.Dense(64, activation="relu"), L.Dense(1, activation="sigmoid")])
    metrics = [tf.keras.metrics.AUC(), tf.keras.metrics.Precision(), tf.keras.metrics.Recall()]

    @tf.function
    def eval_step(x, y):
        p = net(x, training=False)[:, 0]
        for m in metrics:
            m.update_state(y, p)
    it = iter(meter_batches(variant))

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        eval_step(x, y)
    return run


# -- Keras fit on raw strings looked up inside the model ----------------------------------------
COUNTRIES = [f"c{k:02d}" for k in range(40)]
DEVICES = ["android", "ios", "windows", "mac", "linux", "tv"]
BROWSERS = ["chrome", "safari", "firefox", "edge", "opera", "samsung", "other"]
STRING_COLS = ("country", "device", "browser", "referrer")
NUMERIC_COLS = ("age", "session_min", "pages")


def sessions(n: int = 8192, seed: int = 73):
    """A table of web sessions as loaded from a CSV: raw string columns (country,
    device, browser, referrer domain among ~3,000), three numbers, a purchase label."""
    rng = np.random.default_rng(seed)
    cols = {"country": np.array(COUNTRIES)[rng.integers(0, 40, n)],
            "device": np.array(DEVICES)[rng.integers(0, 6, n)],
            "browser": np.array(BROWSERS)[rng.integers(0, 7, n)],
            "referrer": np.array([f"site{k}.example.com" for k in rng.zipf(1.3, n) % 3000]),
            "age": rng.uniform(16, 80, n).astype("float32"),
            "session_min": rng.exponential(6.0, n).astype("float32"),
            "pages": rng.poisson(4.0, n).astype("float32")}
    y = (rng.random(n) < 0.2).astype("float32")
    return cols, y


def session_encoder() -> tf.keras.Model:
    """Raw columns in, [dense features, referrer bucket] out: ``StringLookup`` one-hot for
    the small vocabularies and the numbers scaled, ``Hashing(1024)`` for the referrer."""
    inputs = {c: tf.keras.Input((1,), dtype="string", name=c) for c in STRING_COLS}
    inputs.update({c: tf.keras.Input((1,), name=c) for c in NUMERIC_COLS})
    parts = [L.StringLookup(vocabulary=COUNTRIES, output_mode="one_hot")(inputs["country"]),
             L.StringLookup(vocabulary=DEVICES, output_mode="one_hot")(inputs["device"]),
             L.StringLookup(vocabulary=BROWSERS, output_mode="one_hot")(inputs["browser"])]
    parts += [L.Rescaling(s)(inputs[c]) for c, s in zip(NUMERIC_COLS, (1 / 80, 1 / 30, 1 / 10))]
    return tf.keras.Model(inputs, [L.Concatenate()(parts), L.Hashing(1024)(inputs["referrer"])])


def purchase_head(width: int) -> tf.keras.Model:
    """The trained part: the referrer bucket's Embedding(1024, 16) beside the dense
    features, a 256-128-1 MLP."""
    dense, ref = tf.keras.Input((width,)), tf.keras.Input((1,), dtype="int64")
    h = L.Concatenate()([dense, L.Flatten()(L.Embedding(1024, 16)(ref))])
    h = L.Dense(128, activation="relu")(L.Dense(256, activation="relu")(h))
    return tf.keras.Model([dense, ref], L.Dense(1, activation="sigmoid")(h))


def compiled(net):
    net.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return net


ENCODERS: list = []


def raw_model():
    """The model as written: raw columns in, the encoder's layers inside the model."""
    tf.keras.utils.set_random_seed(0)
    enc = session_encoder()
    head = purchase_head(enc.outputs[0].shape[-1])
    return compiled(tf.keras.Model(enc.inputs, head(enc.outputs)))


def encoded_model():
    """The fix's model: the head alone on encoded rows (the encoder runs in ``tf.data``)."""
    tf.keras.utils.set_random_seed(0)
    ENCODERS[:] = [session_encoder()]
    return compiled(purchase_head(ENCODERS[0].outputs[0].shape[-1]))


def session_batches(pipe: str) -> tf.data.Dataset:
    """The table's rows shuffled, batched 1,024 and prefetched (``fix``: the encoder
    mapped over each batch in parallel, before the prefetch; ``bare``: the first 4
    batches made once and cached)."""
    cols, y = sessions()
    cols = {k: v[:, None] for k, v in cols.items()}
    ds = tf.data.Dataset.from_tensor_slices((cols, y)).shuffle(8192, seed=0).repeat().batch(1024)
    if pipe == "bare":  # the first batches made once: input costs nothing
        return ds.take(4).cache().repeat()
    if pipe == "fix":
        enc = ENCODERS[0]
        ds = ds.map(lambda x, t: (tuple(enc(x)), t), num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


# -- a GradientTape loop on length-bucketed batches, reduce_retracing=True ---------------------
VOCAB = 8000


def documents(n: int = 2048, seed: int = 74):
    """``n`` support-forum posts of 20 to 300 token ids (a list of arrays, as tokenised)
    and one of 4 topics each."""
    rng = np.random.default_rng(seed)
    return ([rng.integers(1, VOCAB, int(k)).astype("int32") for k in rng.integers(20, 301, n)],
            rng.integers(0, 4, n).astype("int32"))


@case("tf_tape_reduce_retracing_buckets", "tensorflow", "training", 6,
      {**TF, "mode": "training", "tf_data": True, "tf_function": True}, split="tuned",
      warmup=6, tags=["gradient_tape", "bucketing", "variable_length", "reduce_retracing"])
def tf_tape_reduce_retracing_buckets(variant):
    """A topic classifier for forum posts (Embedding 8000x64, two Conv1D(128, 5), global
    max pooling, Dense 64, 4 topics, Adam) trained with a ``@tf.function(
    reduce_retracing=True)`` GradientTape step on batches from
    ``bucket_by_sequence_length`` (boundaries 64, 128, 192, 256; batches of 64 down to 16
    posts, each padded to its own longest) over the tokenised posts read with
    ``from_generator``, shuffled and prefetched: the batch and length vary step by step,
    and after its second trace the function runs one generalised graph for every shape.
    The convolutions are the work (compute); the program is written as the guides
    advise."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([
        tf.keras.Input((None,), dtype="int32"), L.Embedding(VOCAB, 64),
        L.Conv1D(128, 5, padding="same", activation="relu"),
        L.Conv1D(128, 5, padding="same", activation="relu"),
        L.GlobalMaxPooling1D(), L.Dense(64, activation="relu"), L.Dense(4)])
    train_step = tape_step(net, tf.keras.optimizers.Adam(1e-3), reduce_retracing=True)
    posts, topics = documents()
    sig = (tf.TensorSpec((None,), tf.int32), tf.TensorSpec((), tf.int32))
    ds = (tf.data.Dataset.from_generator(lambda: zip(posts, topics), output_signature=sig)
          .repeat().shuffle(1024, seed=0)
          .bucket_by_sequence_length(lambda x, y: tf.shape(x)[0], [64, 128, 192, 256],
                                     [64, 48, 32, 24, 16])
          .prefetch(AUTOTUNE))
    it = iter(ds)

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        return float(train_step(x, y))
    return run


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` case with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_string_lookup_in_model",
             fit_spec("run", data=session_batches, net=raw_model, fix_net=encoded_model),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 6,
             split="holdout", warmup=3, share_from_fix="input", share_variant="bare",
             fix="the lookups in a parallel tf.data map over each batch, the model on the "
             "encoded rows", tags=["keras_fit", "preprocessing_layers", "strings", "tabular"])
    CASES["tf_fit_string_lookup_in_model"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a purchase classifier (an Embedding(1024, 16) of the "
        "referrer bucket beside the other features, a 256-128-1 MLP, Adam, accuracy) on a "
        "table of 8,192 web sessions held in memory as raw columns, shuffled, batched 1,024 "
        "and prefetched: the functional model takes the strings and looks them up itself "
        "(``StringLookup`` one-hot for country, device and browser, ``Hashing(1024)`` for "
        "the referrer domain, ``Rescaling`` for three numbers), so the lookups run inside "
        "each train step; the fix is the Keras preprocessing guide's training option, the "
        "same lookups mapped over each batch in the ``tf.data`` pipeline "
        "(``num_parallel_calls=AUTOTUNE``) and the model (embedding and MLP) "
        "trained on the encoded rows.")
