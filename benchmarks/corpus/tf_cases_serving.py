"""TensorFlow / Keras inference and evaluation programs, written without looking at the
advisor's rules (captured and measured by ``run_tf.py``; the TFLite loop held out, the
others tuned since studied): a ``tf.lite.Interpreter``
serving a converted Keras model one request at a time, ``model.evaluate`` of a binary
image classifier with several Keras metrics over a ``tf.data`` validation set, a detector
whose boxes are post-processed with ``tf.image.non_max_suppression`` image by image in a
Python loop, and ``model.predict(x, batch_size=1)`` over rows held in memory.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CLOCK, case
from corpus.tf_cases_field import TF

L = tf.keras.layers


# -- a TFLite model evaluated one image at a time ------------------------------------------
def tabular_scorer(width: int = 256) -> tf.keras.Model:
    """A churn scorer: 64 features -> width -> width -> 128 -> 10 class probabilities."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((64,)), L.Dense(width, activation="relu"),
        L.Dense(width, activation="relu"), L.Dense(128, activation="relu"),
        L.Dense(10, activation="softmax")])


TFLITE: list[bytes] = []


def tflite_model() -> bytes:
    """The scorer (512 wide) converted once per process with
    ``TFLiteConverter.from_keras_model`` (float32, no quantization)."""
    if not TFLITE:
        conv = tf.lite.TFLiteConverter.from_keras_model(tabular_scorer(512))
        TFLITE.append(conv.convert())
    return TFLITE[0]


def feature_requests(n: int = 512, seed: int = 41) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 64)).astype("float32")


def test_rows(batch: int) -> tf.data.Dataset:
    """1,024 held-out rows and labels, batched ``batch`` at a time, repeated."""
    y = np.random.default_rng(44).integers(0, 10, 1024).astype("int32")
    return tf.data.Dataset.from_tensor_slices((feature_requests(1024, 44), y)) \
        .batch(batch).repeat()


@case("tf_infer_tflite_invoke_loop", "tensorflow", "inference", 3,
      {**TF, "mode": "inference", "batch": 1, "tflite": True, "tf_data": True},
      split="holdout", warmup=3,
      fix="each batch in one invoke (input resized to 128 rows)",
      share_from_fix="host_overhead", tags=["tflite", "batch1", "tf_data"])
def tf_infer_tflite_invoke_loop(variant):
    """The accuracy check of a Keras MLP converted to TensorFlow Lite, as the TFLite
    tutorials write it: ``tf.lite.Interpreter`` with its input of one row, the test set
    read from a ``tf.data`` pipeline in batches of 128, and every row of a batch put with
    ``set_tensor``, ``invoke()``-d, its probabilities read with ``get_tensor`` and the
    class taken with ``np.argmax``, then counted against its label; the fix resizes the
    input to 128 rows (``resize_tensor_input`` + ``allocate_tensors``) and runs each batch
    in one ``invoke``."""
    interp = tf.lite.Interpreter(model_content=tflite_model())
    inp = interp.get_input_details()[0]["index"]
    if variant == "fix":
        interp.resize_tensor_input(inp, [128, 64])
    interp.allocate_tensors()
    out = interp.get_output_details()[0]["index"]
    it = iter(test_rows(128))

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        x, y = x.numpy(), y.numpy()
        if variant == "fix":
            interp.set_tensor(inp, x)
            interp.invoke()
            return int((np.argmax(interp.get_tensor(out), axis=1) == y).sum())
        hits = 0
        for row, label in zip(x, y):
            interp.set_tensor(inp, row[None, :])
            interp.invoke()
            hits += int(np.argmax(interp.get_tensor(out)[0]) == label)
        return hits
    return run


# -- model.evaluate with several metrics over a tf.data validation set ------------------------
def pets_classifier(steps_per_execution: int = 1) -> tf.keras.Model:
    """A small binary image classifier (cats vs dogs at 48x48) compiled with accuracy,
    precision, recall and AUC."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([
        tf.keras.Input((48, 48, 3)), L.Rescaling(1 / 255.0),
        L.Conv2D(16, 3, activation="relu"), L.MaxPooling2D(),
        L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, activation="relu"), L.GlobalAveragePooling2D(),
        L.Dropout(0.3), L.Dense(1, activation="sigmoid")])
    net.compile(optimizer="adam", loss="binary_crossentropy",
                metrics=["accuracy", tf.keras.metrics.Precision(),
                         tf.keras.metrics.Recall(), tf.keras.metrics.AUC()],
                steps_per_execution=steps_per_execution)
    return net


def pets_validation() -> tf.data.Dataset:
    """256 validation images (uint8) and labels held in memory, batched 64 at a time,
    cached and prefetched."""
    rng = np.random.default_rng(42)
    x = rng.integers(0, 256, (256, 48, 48, 3), dtype=np.uint8)
    y = rng.integers(0, 2, 256).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(64).cache() \
        .prefetch(tf.data.AUTOTUNE)


@case("tf_eval_metrics_dataset", "tensorflow", "inference", 3,
      {**TF, "mode": "inference", "tf_data": True, "keras_evaluate": True},
      split="tuned", warmup=3, fix="compile(steps_per_execution=4)",
      share_from_fix="host_overhead", tags=["keras_evaluate", "metrics", "tf_data"])
def tf_eval_metrics_dataset(variant):
    """A validation script running ``model.evaluate(val_ds, return_dict=True)`` of a small
    binary image classifier compiled with accuracy, ``Precision``, ``Recall`` and ``AUC``
    over a cached, prefetched ``tf.data`` set of 4 batches of 64 images: one step is one
    ``evaluate`` call (4 batches); the fix a user tries is
    ``compile(steps_per_execution=4)``, all 4 batches in one call of the test function,
    and the host-overhead share is what it saves."""
    net = pets_classifier(4 if variant == "fix" else 1)
    val = pets_validation()

    def run(i):
        return net.evaluate(val, verbose=0, return_dict=True)
    return run


# -- a detector's boxes suppressed image by image ---------------------------------------------
ANCHORS = 400


def box_detector() -> tf.keras.Model:
    """A tiny single-class detector: a conv backbone on 64x64 images and a head giving
    ``ANCHORS`` boxes (y1, x1, y2, x2 in [0, 1]) and objectness scores per image."""
    tf.keras.utils.set_random_seed(0)
    img = tf.keras.Input((64, 64, 3))
    h = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(img)
    h = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(h)
    h = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(h)
    h = L.Flatten()(h)
    corner = L.Reshape((ANCHORS, 2))(L.Dense(ANCHORS * 2, activation="sigmoid")(h))
    size = L.Reshape((ANCHORS, 2))(L.Dense(ANCHORS * 2, activation="sigmoid")(h))
    boxes = L.Concatenate()([corner * 0.8, corner * 0.8 + 0.05 + size * 0.15])
    scores = L.Dense(ANCHORS, activation="sigmoid")(h)
    return tf.keras.Model(img, [boxes, scores])


@case("tf_infer_nms_per_image_loop", "tensorflow", "inference", 3,
      {**TF, "mode": "inference"}, split="tuned", warmup=3,
      fix="tf.image.combined_non_max_suppression on the whole batch",
      share_from_fix="host_overhead", tags=["detection", "nms", "python_loop"])
def tf_infer_nms_per_image_loop(variant):
    """A detection job: a ``tf.function`` detector gives 400 boxes and scores for each of
    a batch of 16 images, then a Python loop over the batch runs
    ``tf.image.non_max_suppression`` (50 boxes, IoU 0.5, score 0.3) on each image,
    ``tf.gather``-s its boxes and scores and reads them with ``.numpy()``; the fix runs
    ``tf.image.combined_non_max_suppression`` on the whole batch and reads its outputs
    once."""
    net = box_detector()
    detect = tf.function(lambda x: net(x, training=False))
    images = tf.random.uniform((64, 64, 64, 3), seed=1)

    def run(i):
        k = (16 * i) % 64
        boxes, scores = detect(images[k:k + 16])
        if variant == "fix":
            nms = tf.image.combined_non_max_suppression(
                boxes[:, :, None, :], scores[:, :, None], 50, 50, iou_threshold=0.5,
                score_threshold=0.3)
            n = nms.valid_detections.numpy()
            return [(b[:m], s[:m]) for b, s, m in zip(nms.nmsed_boxes.numpy(),
                                                      nms.nmsed_scores.numpy(), n)]
        out = []
        for b in range(boxes.shape[0]):
            keep = tf.image.non_max_suppression(boxes[b], scores[b], 50, iou_threshold=0.5,
                                                score_threshold=0.3)
            out.append((tf.gather(boxes[b], keep).numpy(), tf.gather(scores[b], keep).numpy()))
        return out
    return run


# -- model.predict with batch_size=1 over rows held in memory ---------------------------------
@case("tf_predict_batch_size_1", "tensorflow", "inference", 3,
      {**TF, "mode": "inference", "batch": 1, "keras_predict": True}, split="tuned",
      warmup=3, fix="model.predict with the default batch_size (32)",
      share_from_fix="host_overhead", share_variant="bare",
      tags=["keras_predict", "batch1"])
def tf_predict_batch_size_1(variant):
    """A scoring script run every quarter hour calling ``model.predict(x, batch_size=1)``
    on its 16 new customer rows (64 features, a NumPy array in memory) with the churn MLP: one
    ``predict`` call that runs its predict function once per row, around Keras' own
    set-up of the call; the fix leaves ``batch_size`` at its default of 32 (one batch).
    The host-overhead share is what the model called in a ``tf.function`` on the 16 rows
    (``bare``, no ``predict``) saves."""
    net = tabular_scorer()
    rows = feature_requests(160, 43)
    size = None if variant == "fix" else 1
    call = tf.function(lambda x: net(x, training=False))

    def run(i):
        x = rows[(16 * i) % 160:(16 * i) % 160 + 16]
        if variant == "bare":
            return call(x).numpy().argmax(1)
        return net.predict(x, batch_size=size, verbose=0).argmax(1)
    return run
