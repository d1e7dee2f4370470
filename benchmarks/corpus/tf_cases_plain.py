"""Held-out TensorFlow cases of plain programs, written without looking at the advisor's
rules (captured and measured by ``run_tf.py``): Keras ``fit`` of a GRU text classifier on
headlines of different lengths batched with ``padded_batch``, and a scoring job whose
``tf.data`` pipeline turns raw review texts into token ids with a ``TextVectorization``
layer mapped over each batch.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
VOCAB = 5000


def token_headlines(n: int = 1024, seed: int = 21) -> list[tuple[np.ndarray, int]]:
    """``n`` news headlines as token ids (1..VOCAB-1), 6 to 24 tokens long, and their labels."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(1, VOCAB, k).astype("int32"), int(k % 2))
            for k in rng.integers(6, 25, n)]


def padded_headlines(pipe: str) -> tf.data.Dataset:
    """The headlines, a Python list of id arrays, read with ``from_generator``, shuffled and
    ``padded_batch``-ed 128 at a time (each batch as long as its longest headline),
    prefetched; ``bare``: its first 4 batches made once and cached."""
    rows = token_headlines()
    ds = tf.data.Dataset.from_generator(
        lambda: iter(rows), output_signature=(tf.TensorSpec((None,), tf.int32),
                                              tf.TensorSpec((), tf.int32)))
    ds = ds.shuffle(1024, seed=0).padded_batch(128)
    if pipe == "bare":
        return ds.take(4).cache().repeat()
    return ds.repeat().prefetch(tf.data.AUTOTUNE)


def gru_classifier(keras_model):
    """Embedding (masking the padding) -> GRU(64) -> Dense(2)."""
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((None,), dtype="int32"), L.Embedding(VOCAB, 64, mask_zero=True),
        L.GRU(64), L.Dense(2)]))


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_gru_padded_batch",
             fit_spec("run", data=padded_headlines, net=lambda: gru_classifier(keras_model)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 3,
             split="holdout", share_from_fix="input", share_variant="bare", warmup=4,
             tags=["keras_fit", "rnn", "gru", "padded_batch", "variable_length"])
    CASES["tf_fit_gru_padded_batch"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a GRU headline classifier (a 5000x64 embedding with "
        "``mask_zero=True``, ``GRU(64)``, a 2-way head) on headlines of 6 to 24 tokens "
        "held as a Python list of id arrays and read with ``from_generator``, shuffled "
        "and batched 128 at a time with ``padded_batch`` (every batch as long as its "
        "longest headline) and prefetched: the recurrent layer steps through each batch's "
        "tokens (compute); the input share is what the same ``fit`` on batches made once "
        "saves.")


# -- inference: raw texts vectorized per batch in the input pipeline -------------------------
WORDS = [f"word{k}" for k in range(3000)]


def raw_texts(n: int = 2048, seed: int = 22) -> list[str]:
    """Review texts of 60 to 240 words with capitals and punctuation."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), 60 + k % 181)]
        out.append(" ".join(w.capitalize() + ("," if j % 9 == 0 else "")
                            for j, w in enumerate(words)) + "!")
    return out


VECTORIZERS: list = []


def vectorizer() -> tf.keras.layers.TextVectorization:
    """A ``TextVectorization`` layer (lower-case and strip punctuation, split on spaces,
    words and bigrams, TF-IDF weights over a 2,000-term vocabulary) adapted once per
    process."""
    if not VECTORIZERS:
        v = L.TextVectorization(max_tokens=2000, ngrams=2, output_mode="tf_idf")
        v.adapt(tf.data.Dataset.from_tensor_slices(raw_texts(512, 23)).batch(128))
        VECTORIZERS.append(v)
    return VECTORIZERS[0]


def text_scorer() -> tf.keras.Model:
    """A bag-of-bigrams classifier: TF-IDF terms -> 64 (dropout) -> 3 class
    probabilities."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((2000,)), L.Dense(64, activation="relu"), L.Dropout(0.5),
        L.Dense(3, activation="softmax")])


@case("tf_infer_text_vectorize_map", "tensorflow", "inference", 6,
      {**TF, "mode": "inference", "tf_data": True, "tf_data_parallel": False},
      split="tuned", warmup=3, fix="map(num_parallel_calls=AUTOTUNE) + prefetch",
      tags=["tf_data", "text", "text_vectorization", "batch_scoring"])
def tf_infer_text_vectorize_map(variant):
    """A batch scoring job over raw review texts: a ``tf.data`` pipeline batches the texts
    256 at a time and maps a ``TextVectorization`` layer (lower-casing, punctuation
    stripped by regex, split, vocabulary lookup) over each batch, serially and without
    prefetch; a small embedding classifier scores each batch in a ``tf.function`` and the
    predicted classes are read with one ``.numpy()``. The batch fetch is the input phase;
    the fix maps in parallel and prefetches."""
    vec, net = vectorizer(), text_scorer()
    ds = tf.data.Dataset.from_tensor_slices(raw_texts()).repeat().batch(256)
    if variant == "fix":
        ds = ds.map(vec, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    else:
        ds = ds.map(vec)
    it = iter(ds)
    score = tf.function(lambda ids: tf.argmax(net(ids, training=False), 1))

    def run(i):
        with CLOCK("input"):
            ids = next(it)
        return score(ids).numpy()
    return run
