"""TensorFlow inference and request-serving programs, written and first scored without
looking at the advisor's rules (captured and measured by ``run_tf.py``; held out): a
``tf.function`` text classifier served one request at a time on requests of their own
length, uploaded photos decoded, resized and normalised eagerly one by one before a batched
model call, a GRU translator decoding greedily with a ``tf.function`` called once per output
token, and ``model.predict`` called in a Python loop on each batch of a ``tf.data`` set.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CLOCK, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


# -- a tf.function classifier traced again for every new request length ------------------------
VOCAB = 4000


def ticket_classifier() -> tf.keras.Model:
    """Support-ticket routing: token embeddings, two 1-d convolutions, max-pooled, 6
    queues."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((None,), dtype="int32"), L.Embedding(VOCAB, 64),
        L.Conv1D(128, 3, padding="same", activation="relu"),
        L.Conv1D(128, 3, padding="same", activation="relu"),
        L.GlobalMaxPooling1D(), L.Dense(64, activation="relu"), L.Dense(6)])


@case("tf_infer_retrace_request_lengths", "tensorflow", "inference", 4,
      {**TF, "mode": "inference", "batch": 1, "tf_function": True}, split="holdout",
      warmup=3, fix="input_signature=[tf.TensorSpec((1, None), tf.int32)] (one trace)",
      share_from_fix="startup", tags=["retrace", "serving", "variable_length"])
def tf_infer_retrace_request_lengths(variant):
    """A ticket-routing service: each request is one ticket's token ids (16 to 512 of
    them, as long as the ticket) scored by a Keras 1-d conv classifier in a
    ``@tf.function`` ``route(tokens)`` and read with ``.numpy()``: every length not seen
    before is a new input shape, so ``tf.function`` traces the model and builds its graph
    again; the fix gives the function an ``input_signature`` whose length is ``None``."""
    net = ticket_classifier()
    sig = [tf.TensorSpec((1, None), tf.int32)] if variant == "fix" else None

    @tf.function(input_signature=sig)
    def route(tokens):
        return tf.nn.softmax(net(tokens, training=False))
    rng = np.random.default_rng(51)
    lengths = rng.integers(16, 513, 2000)
    tickets = [rng.integers(1, VOCAB, (1, int(n))).astype("int32") for n in lengths]

    def run(i):
        probs = route(tf.constant(tickets[i % len(tickets)])).numpy()
        return int(probs.argmax()), float(probs.max())
    return run


# -- uploaded photos preprocessed eagerly one by one before one batched call -------------------
def photo_model() -> tf.keras.Model:
    """A small product-photo classifier on 96x96 images (three conv blocks, 12 classes)."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((96, 96, 3)),
        L.Conv2D(16, 3, strides=2, padding="same", activation="relu"),
        L.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
        L.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
        L.GlobalAveragePooling2D(), L.Dense(12)])


def uploads(n: int = 64, seed: int = 52) -> list[bytes]:
    """``n`` JPEG files as uploaded: photos of 160x120 to 320x240 pixels, encoded once."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        h, w = int(rng.integers(120, 241)), int(rng.integers(160, 321))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        out.append(tf.io.encode_jpeg(img, quality=90).numpy())
    return out


def load_photo(data):
    """Decode, resize to 96x96 and scale to [-1, 1], as the serving tutorials do."""
    img = tf.io.decode_jpeg(data, channels=3)
    img = tf.image.resize(img, (96, 96))
    return img / 127.5 - 1.0


@case("tf_infer_eager_image_preprocess", "tensorflow", "inference", 3,
      {**TF, "mode": "inference", "tf_function": True}, split="tuned", warmup=3,
      fix="the decoding in a tf.data map(num_parallel_calls=AUTOTUNE) + batch + prefetch",
      tags=["preprocessing", "eager", "images", "serving"])
def tf_infer_eager_image_preprocess(variant):
    """A batch tagging job over uploaded product photos: each step takes 16 JPEG files,
    decodes, resizes (``tf.image.resize`` to 96x96) and scales each one eagerly in a Python
    loop, stacks them and classifies the batch with the model in a ``tf.function``; the
    fix maps the same ``load_photo`` over the files in a ``tf.data`` pipeline with
    ``num_parallel_calls=AUTOTUNE``, batched 16 and prefetched."""
    net = photo_model()
    classify = tf.function(lambda x: tf.argmax(net(x, training=False), 1))
    files = uploads()
    it = iter(tf.data.Dataset.from_tensor_slices(files).repeat()
              .map(load_photo, num_parallel_calls=AUTOTUNE).batch(16).prefetch(AUTOTUNE))

    def run(i):
        with CLOCK("input"):
            if variant == "fix":
                batch = next(it)
            else:
                k = (16 * i) % len(files)
                batch = tf.stack([load_photo(f) for f in files[k:k + 16]])
        return classify(batch).numpy()
    return run


# -- a translator decoding with one tf.function call per output token --------------------------
SRC_VOCAB, TGT_VOCAB, UNITS, START, END = 3000, 3000, 128, 1, 2


class Translator(tf.Module):
    """A GRU encoder-decoder (embeddings of 64, GRUs of 128 units) with greedy decoding:
    ``step`` is one decoder step in a ``tf.function``; ``translate_loop`` decodes in one
    function with a ``tf.while_loop`` (AutoGraph's ``for`` over ``tf.range``)."""

    def __init__(self):
        super().__init__()
        tf.keras.utils.set_random_seed(0)
        self.src_emb = L.Embedding(SRC_VOCAB, 64)
        self.encoder = L.GRU(UNITS, return_state=True)
        self.tgt_emb = L.Embedding(TGT_VOCAB, 64)
        self.cell = L.GRUCell(UNITS)
        self.out = L.Dense(TGT_VOCAB)

    def encode(self, src):
        _, state = self.encoder(self.src_emb(src))
        return state

    def next_token(self, tok, state):
        h, new = self.cell(self.tgt_emb(tok), state)
        new = new[0] if isinstance(new, (list, tuple)) else new
        return tf.argmax(self.out(h), -1, output_type=tf.int32), new

    @tf.function
    def start(self, src):
        state = self.encode(src)
        return tf.fill([tf.shape(src)[0]], START), state

    @tf.function
    def step(self, tok, state, done):
        tok, state = self.next_token(tok, state)
        tok = tf.where(done, 0, tok)
        return tok, state, done | (tok == END)

    @tf.function
    def translate_loop(self, src, max_len):
        tok, state = self.start(src)
        done = tf.zeros_like(tok, tf.bool)
        out = tf.TensorArray(tf.int32, size=max_len)
        for t in tf.range(max_len):
            tok, state, done = self.step(tok, state, done)
            out = out.write(t, tok)
            if tf.reduce_all(done):
                break
        return tf.transpose(out.stack())


@case("tf_infer_seq2seq_token_calls", "tensorflow", "inference", 3,
      {**TF, "mode": "inference", "tf_function": True}, split="tuned", warmup=3,
      fix="the decoding loop inside one tf.function (tf.while_loop over the tokens)",
      share_from_fix="host_overhead", tags=["seq2seq", "decode", "python_loop"])
def tf_infer_seq2seq_token_calls(variant):
    """A translation service: batches of 8 source sentences (24 tokens) encoded by a GRU,
    then decoded greedily for 32 tokens as the NMT tutorial's ``translate`` does, a
    Python loop calling the ``tf.function`` decoder step once per output token and
    stopping early when ``tf.reduce_all(done)`` (read each token); the fix runs the same
    loop inside one ``tf.function`` (AutoGraph turns it into a ``tf.while_loop``)."""
    model = Translator()
    src = tf.constant(np.random.default_rng(53).integers(3, SRC_VOCAB, (64, 24)), tf.int32)

    def run(i):
        batch = src[(8 * i) % 64:(8 * i) % 64 + 8]
        if variant == "fix":
            return model.translate_loop(batch, tf.constant(32)).numpy()
        tok, state = model.start(batch)
        done, out = tf.zeros_like(tok, tf.bool), []
        for _ in range(32):
            tok, state, done = model.step(tok, state, done)
            out.append(tok)
            if tf.reduce_all(done):
                break
        return tf.stack(out, 1).numpy()
    return run


# -- model.predict called on each batch of a tf.data set ---------------------------------------
def defect_model() -> tf.keras.Model:
    """A small defect classifier on 48x48 greyscale crops (two conv blocks, 4 classes)."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((48, 48, 1)), L.Conv2D(16, 3, activation="relu"), L.MaxPooling2D(),
        L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(), L.Flatten(),
        L.Dense(64, activation="relu"), L.Dense(4, activation="softmax")])


@case("tf_infer_predict_per_batch_loop", "tensorflow", "inference", 3,
      {**TF, "mode": "inference", "keras_predict": True, "tf_data": True},
      split="holdout", warmup=3, fix="one model.predict over a shift's 4 batches",
      share_from_fix="host_overhead", per_item=1, fix_per_item=4,
      tags=["keras_predict", "tf_data", "python_loop"])
def tf_infer_predict_per_batch_loop(variant):
    """A nightly inspection job scoring crops from a ``tf.data`` set batched 32 at a time,
    iterated in Python (``for x in ds``) with ``model.predict(x, verbose=0)`` called on
    each batch and the probabilities collected: a step is one batch's ``predict``; the
    fix is one ``model.predict(ds)`` over a shift's dataset of 4 batches (a fix step
    scores 4 batches)."""
    net = defect_model()
    crops = np.random.default_rng(54).random((512, 48, 48, 1)).astype("float32")
    if variant == "fix":
        def run(i):
            k = (128 * i) % 512
            ds = tf.data.Dataset.from_tensor_slices(crops[k:k + 128]).batch(32)
            return net.predict(ds, verbose=0).argmax(1)
        return run
    it = iter(tf.data.Dataset.from_tensor_slices(crops).batch(32).repeat())

    def run(i):
        with CLOCK("input"):
            x = next(it)
        return net.predict(x, verbose=0).argmax(1)
    return run
