"""Held-out TensorFlow / Keras programs of kinds the others lack, written and scored without
looking at the advisor's rules (captured and measured by ``run_tf.py``): a GradientTape
loop on variable-length documents batched as ``tf.RaggedTensor``s made with
``tf.ragged.constant`` from Python lists every step; ``fit`` on a ``keras.utils.PyDataset``
whose ``__getitem__`` augments images one by one in numpy, left at its default
``workers=1``; ``fit`` of a ``TextVectorization`` + LSTM sentiment classifier; and ``fit``
of a small CNN on a ``tf.data`` pipeline whose ``tf.image`` augmentation is mapped
without ``num_parallel_calls``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import TF
from corpus.tf_cases_wild import WORDS, cross_entropy, custom_standardization, review_texts

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


# -- input: ragged batches made with tf.ragged.constant from Python lists ---------------------
VOCAB_SIZE = 8000


def token_documents(n: int = 1024, seed: int = 71) -> tuple[list[list[int]], list[int]]:
    """``n`` documents as a tokenizer hands them over: Python lists of 40-240 token ids,
    and a topic label (one of 8) each."""
    rng = np.random.default_rng(seed)
    docs = [rng.integers(1, VOCAB_SIZE, rng.integers(40, 240)).tolist() for _ in range(n)]
    return docs, rng.integers(0, 8, n).tolist()


@case("tf_tape_ragged_constant_batches", "tensorflow", "training", 8,
      {**TF, "mode": "training"}, split="holdout", warmup=4,
      fix="tf.RaggedTensor.from_row_lengths on the concatenated ids",
      tags=["gradient_tape", "ragged", "text"])
def tf_tape_ragged_constant_batches(variant):
    """A ``tf.function`` GradientTape step of a bag-of-embeddings topic classifier
    (Embedding 8000x64 on the ragged batch's ``flat_values``, mean-pooled per document
    through ``RaggedTensor.from_row_splits``, a 256-256-8 MLP, Adam) on batches of 64
    documents of 40-240 token ids kept as Python lists; each step makes its batch with
    ``tf.ragged.constant(docs[lo:hi])`` (input); the fix builds it with
    ``tf.RaggedTensor.from_row_lengths`` from the ids concatenated by numpy."""
    tf.keras.utils.set_random_seed(0)
    docs, labels = token_documents()
    embed = L.Embedding(VOCAB_SIZE, 64)
    head = tf.keras.Sequential([tf.keras.Input((64,)), L.Dense(256, activation="relu"),
                                L.Dense(256, activation="relu"), L.Dense(8)])
    embed.build((None,))
    opt, loss_fn = tf.keras.optimizers.Adam(1e-3), cross_entropy()
    variables = [*embed.trainable_variables, *head.trainable_variables]

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            vectors = tf.RaggedTensor.from_row_splits(embed(x.flat_values), x.row_splits)
            loss = loss_fn(y, head(tf.reduce_mean(vectors, axis=1), training=True))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    def run(i):
        lo = (64 * i) % len(docs)
        with CLOCK("input"):
            batch = docs[lo:lo + 64]
            if variant == "fix":
                x = tf.RaggedTensor.from_row_lengths(np.concatenate(batch).astype("int32"),
                                                     [len(d) for d in batch])
            else:
                x = tf.ragged.constant(batch, dtype=tf.int32)
            y = tf.constant(labels[lo:lo + 64], dtype=tf.int32)
        return float(train_step(x, y))
    return run


# -- a PyDataset augmenting images one by one in numpy, at its default workers=1 -----------
def pets(n: int = 1024, size: int = 64, seed: int = 72):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
            rng.integers(0, 10, n).astype("int32"))


def augment_numpy(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Pad-and-crop, flip, brightness and contrast jitter, a 3x3 box blur and
    standardisation of one uint8 image, in numpy."""
    a = np.pad(img.astype("float32") / 255.0, ((4, 4), (4, 4), (0, 0)), mode="reflect")
    y0, x0 = rng.integers(0, 9, 2)
    a = a[y0:y0 + 64, x0:x0 + 64]
    if rng.random() < 0.5:
        a = a[:, ::-1]
    a = (a - a.mean()) * rng.uniform(0.8, 1.2) + a.mean() + rng.uniform(-0.1, 0.1)
    p = np.pad(a, ((1, 1), (1, 1), (0, 0)), mode="edge")
    a = sum(p[dy:dy + 64, dx:dx + 64] for dy in range(3) for dx in range(3)) / 9.0
    return (a - a.mean()) / (a.std() + 1e-6)


class PetImages(tf.keras.utils.PyDataset):
    """Batches of 32 images augmented one by one in ``__getitem__``, as the Keras 3
    ``PyDataset`` guide writes a custom loader; ``workers`` as given."""

    def __init__(self, x, y, batch_size=32, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return len(self.x) // self.batch_size

    def __getitem__(self, idx):
        lo = idx * self.batch_size
        rng = np.random.default_rng(idx)
        xs = np.stack([augment_numpy(img, rng) for img in self.x[lo:lo + self.batch_size]])
        return xs.astype("float32"), self.y[lo:lo + self.batch_size]


class CachedBatches(tf.keras.utils.PyDataset):
    """The first batches of a dataset made once and handed out again (input costs
    nothing)."""

    def __init__(self, source, n: int = 4):
        super().__init__()
        self.batches, self.size = [source[k] for k in range(n)], len(source)

    def __len__(self):
        return self.size

    def __getitem__(self, idx):
        return self.batches[idx % len(self.batches)]


def pet_batches(pipe: str):
    """``run``: :class:`PetImages` with the default ``workers=1``; ``fix``: ``workers=2``
    (a thread pool); ``bare``: its first batches made once."""
    source = PetImages(*pets(), workers=2 if pipe == "fix" else 1)
    return CachedBatches(source) if pipe == "bare" else source


def pet_cnn(keras_model):
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((64, 64, 3)), L.Conv2D(16, 3, strides=2, padding="same",
                                              activation="relu"),
        L.Conv2D(32, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.GlobalAveragePooling2D(),
        L.Dense(10)]))


# -- compute: TextVectorization + LSTM ----------------------------------------------------------
SEQ_LEN = 80


def review_sequences(pipe: str) -> tf.data.Dataset:
    """Raw reviews batched 32 at a time, vectorised by a ``TextVectorization`` layer in a
    parallel map, cached after it and prefetched (the same for every variant)."""
    texts, labels = review_texts(256, seed=73)
    vectorize = L.TextVectorization(vocabulary=WORDS, output_sequence_length=SEQ_LEN,
                                    standardize=custom_standardization)
    return (tf.data.Dataset.from_tensor_slices((texts, labels)).batch(32)
            .map(lambda t, y: (vectorize(t), y), num_parallel_calls=AUTOTUNE)
            .cache().repeat().prefetch(AUTOTUNE))


def lstm_classifier() -> tf.keras.Model:
    net = tf.keras.Sequential([tf.keras.Input((SEQ_LEN,), dtype="int64"),
                               L.Embedding(len(WORDS) + 2, 32, mask_zero=True),
                               L.LSTM(32), L.Dense(32, activation="relu"), L.Dense(1)])
    net.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                metrics=["accuracy"])
    return net


# -- tf.image augmentation mapped without num_parallel_calls ----------------------------------
def augment_tf(img, label):
    """The data-augmentation guide's ``tf.image`` ops on one image."""
    a = tf.image.resize(tf.image.convert_image_dtype(img, tf.float32), (64, 64))
    a = tf.image.resize_with_crop_or_pad(a, 70, 70)
    a = tf.image.random_crop(a, (64, 64, 3))
    a = tf.image.random_flip_left_right(a)
    a = tf.image.random_brightness(a, 0.2)
    a = tf.image.random_saturation(a, 0.8, 1.2)
    a = tf.image.random_hue(a, 0.05)
    a = tf.image.random_contrast(a, 0.8, 1.2)
    a = tf.image.random_jpeg_quality(tf.clip_by_value(a, 0.0, 1.0), 75, 95)
    return tf.clip_by_value(a, 0.0, 1.0), label


def flower_batches(pipe: str) -> tf.data.Dataset:
    """``run``: ``map(augment_tf)`` with no ``num_parallel_calls``, batched 64 at a time
    and prefetched; ``fix``: the map with ``num_parallel_calls=AUTOTUNE``; ``bare``: the
    first batches made once and cached."""
    ds = tf.data.Dataset.from_tensor_slices(pets(512, 128, seed=74)).repeat()
    if pipe == "bare":
        return ds.take(64 * 4).map(augment_tf).batch(64).cache().repeat()
    ds = ds.map(augment_tf, num_parallel_calls=AUTOTUNE if pipe == "fix" else None)
    return ds.batch(64).prefetch(AUTOTUNE)


def flower_cnn(keras_model):
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((64, 64, 3)), L.Conv2D(16, 3, strides=2, padding="same",
                                              activation="relu"),
        L.MaxPooling2D(), L.Conv2D(32, 3, padding="same", activation="relu"),
        L.GlobalAveragePooling2D(), L.Dense(10)]))


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_facts = {**TF, "mode": "training", "keras_fit": True}
    fit_case("tf_fit_pydataset_workers",
             fit_spec("run", data=pet_batches, net=lambda: pet_cnn(keras_model)),
             fit_facts, 16, split="holdout", warmup=3, fix="PyDataset(workers=2)",
             share_from_fix="input", share_variant="bare",
             tags=["keras_fit", "py_dataset", "numpy_augmentation"])
    CASES["tf_fit_pydataset_workers"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a small CNN (64x64 images, 10 classes) on a "
        "``keras.utils.PyDataset`` whose ``__getitem__`` augments each of its 32 images "
        "in numpy (pad and crop, flip, brightness and contrast, a 3x3 box blur, "
        "standardisation), left at the default ``workers=1``: Keras runs it in "
        "``from_generator`` with a prefetch; the fix passes ``workers=2`` (a thread "
        "pool).")
    fit_case("tf_fit_textvec_lstm",
             fit_spec("run", data=review_sequences, net=lstm_classifier),
             {**fit_facts, "tf_data": True, "tf_data_parallel": True}, 10, split="holdout",
             warmup=3, tags=["keras_fit", "text", "lstm", "text_vectorization"])
    CASES["tf_fit_textvec_lstm"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a sentiment classifier (Embedding 32 with "
        "``mask_zero=True``, ``LSTM(32)``, Dense 32, one logit, Adam) on reviews "
        "vectorised by a ``TextVectorization`` layer (80 ids) in a parallel map over "
        "batches of 32 raw texts, cached and prefetched: the masked LSTM's steps are the "
        "work, nothing to fix.")
    fit_case("tf_fit_image_augment_serial_map",
             fit_spec("run", data=flower_batches, net=lambda: flower_cnn(keras_model)),
             {**fit_facts, "tf_data": True, "tf_data_parallel": False}, 16,
             split="holdout", warmup=3, fix="map(num_parallel_calls=AUTOTUNE)",
             share_from_fix="input", share_variant="bare",
             tags=["keras_fit", "tf_data", "augmentation", "tf_image"])
    CASES["tf_fit_image_augment_serial_map"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a small CNN (two conv layers, 64x64 images) on a "
        "``tf.data`` pipeline mapping the data-augmentation guide's ``tf.image`` ops "
        "(resize of 128x128 photos to 64x64, pad and random crop, flip, brightness, "
        "saturation, hue, contrast, JPEG quality) over single images without "
        "``num_parallel_calls``, batched 64 at a time and prefetched; the fix maps with "
        "``num_parallel_calls=AUTOTUNE``.")
