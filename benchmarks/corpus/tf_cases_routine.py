"""Held-out TensorFlow cases of routine programs, written without looking at the advisor's
rules (captured and measured by ``run_tf.py``): Keras ``fit`` on JPEG photos loaded with
``image_dataset_from_directory``, and a Keras model exported as a SavedModel and served one
request at a time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from corpus.common import CASES, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
PHOTOS: list[Path] = []


def photo_folder(n: int = 128, classes: int = 2) -> str:
    """``n`` smooth 512x384 photos (gradients, blobs and grain) written once per process as
    JPEG files, one sub-folder per class, as a user's data set sits on disk."""
    if not PHOTOS:
        root = Path(tempfile.mkdtemp(prefix="corpus-photos-"))
        rng = np.random.default_rng(11)
        yy, xx = np.mgrid[0:384, 0:512].astype("float32")
        for k in range(n):
            base = rng.uniform(40, 200, 3)
            cy, cx, r = rng.uniform(0, 384), rng.uniform(0, 512), rng.uniform(30, 140)
            blob = 60 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
            img = base + (xx / 512)[..., None] * rng.uniform(-40, 40, 3) + blob[..., None]
            img += rng.normal(0, 6, img.shape)
            folder = root / f"class_{k % classes}"
            folder.mkdir(exist_ok=True)
            jpg = tf.io.encode_jpeg(np.clip(img, 0, 255).astype("uint8"), quality=90)
            (folder / f"img_{k:04d}.jpg").write_bytes(jpg.numpy())
        PHOTOS.append(root)
    return str(PHOTOS[0])


def photo_dataset(pipe: str) -> tf.data.Dataset:
    """``image_dataset_from_directory`` (each file read, decoded and resized to 64x64 by
    its parallel map, batched by 32 and prefetched), repeated (``run``); ``fix``: the
    tutorial's ``cache()`` + ``prefetch`` after it; ``bare``: its first 4 batches made
    once and cached."""
    ds = tf.keras.utils.image_dataset_from_directory(
        photo_folder(), image_size=(64, 64), batch_size=32, shuffle=True, seed=0,
        verbose=False)
    if pipe == "bare":
        return ds.take(4).cache().repeat()
    if pipe == "fix":
        return ds.cache().prefetch(tf.data.AUTOTUNE).repeat()
    return ds.repeat()


def photo_model(keras_model):
    """A small CNN on the 64x64 photos, rescaled inside the model as the tutorial does."""
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((64, 64, 3)), L.Rescaling(1.0 / 255),
        L.Conv2D(16, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(32, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.GlobalAveragePooling2D(),
        L.Dense(2)]))


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` case with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_jpeg_directory",
             fit_spec("run", data=photo_dataset, net=lambda: photo_model(keras_model)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True,
              "tf_data_parallel": True}, 6,
             split="tuned", fix="cache() + prefetch(AUTOTUNE) after the loaded data set",
             share_from_fix="input", share_variant="bare", warmup=6,
             tags=["keras_fit", "tf_data", "jpeg", "image_dataset_from_directory"])
    CASES["tf_fit_jpeg_directory"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a small CNN (3 conv layers, 64x64 inputs) on 128 "
        "512x384 JPEG photos in class folders, loaded with "
        "``tf.keras.utils.image_dataset_from_directory`` (its parallel map reads, decodes "
        "and resizes every file each epoch; batches of 32, prefetched): the input share is "
        "what the same ``fit`` on batches made once saves, and the fix is the tutorial's "
        "``cache()`` + ``prefetch`` of the decoded batches.")


# -- inference: a SavedModel answering one request per call -----------------------------------
SAVED: list[str] = []


def scorer() -> tf.keras.Model:
    """A churn scorer: 64 features through 256-256 Dense layers to 8 class scores."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([tf.keras.Input((64,)), L.Dense(256, activation="relu"),
                                L.Dense(256, activation="relu"),
                                L.Dense(8, activation="softmax")])


def saved_scorer() -> str:
    """The scorer exported once per process as a SavedModel whose ``serve`` signature
    takes a batch of any size (``input_signature`` ``[None, 64]``)."""
    if not SAVED:
        net = scorer()
        module = tf.Module()
        module.net = net
        module.serve = tf.function(lambda x: net(x, training=False),
                                   input_signature=[tf.TensorSpec([None, 64], tf.float32)])
        path = str(Path(tempfile.mkdtemp(prefix="corpus-saved-")) / "scorer")
        tf.saved_model.save(module, path)
        SAVED.append(path)
    return SAVED[0]


def requests(n: int = 256, seed: int = 21) -> list[list[float]]:
    """Incoming requests: each a JSON-like list of 64 feature values."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 64)).astype("float32").tolist()


@case("tf_infer_savedmodel_per_request", "tensorflow", "inference", 4,
      {**TF, "mode": "inference", "batch": 1, "saved_model": True},
      warmup=3, fix="the step's 16 requests stacked and scored in one serve call",
      share_from_fix="host_overhead", per_item=16, fix_per_item=16,
      tags=["saved_model", "serving", "batch1"])
def tf_infer_savedmodel_per_request(variant):
    """A request handler serving a Keras scorer loaded with ``tf.saved_model.load``: each
    step answers 16 requests one at a time, every request's feature list turned into a
    1x64 array, scored by the SavedModel's ``serve`` function and its best class and score
    read with ``.numpy()``; the fix stacks the 16 requests and scores them in one call."""
    served = tf.saved_model.load(saved_scorer())
    reqs = requests()

    def answer(probs: np.ndarray) -> list[tuple[int, float]]:
        return [(int(p.argmax()), float(p.max())) for p in probs]

    def run(i):
        batch = reqs[(16 * i) % 256:(16 * i) % 256 + 16]
        if variant == "fix":
            return answer(served.serve(np.asarray(batch, dtype="float32")).numpy())
        return [answer(served.serve(np.asarray([r], dtype="float32")).numpy())[0]
                for r in batch]
    return run
