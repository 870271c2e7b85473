"""Dynamic-range int8 TFLite: the encoder and the classifier, a quarter of the size, close outputs.

Converted in-process from a tiny model (tiny.json: 97% of its 0.49M weights are the [30000, 16]
embedding table, so weights dominate the file as they do for ALBERT-base).
"""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.export.encoder import EncoderExport
from albert_tf.export.tflite import (export_classifier_tflite, export_serving_tflite, run_tflite,
                                     tflite_logits)
from albert_tf.modeling.classifier import AlbertClassifier
from conftest import ROOT

SEQ = 16
CONFIG = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")


def randomise(model):
  """Non-trivial values everywhere (initial ones give near-zero logits, where argmax is noise)."""
  for variable in model.trainable_variables:
    variable.assign(tf.random.stateless_normal(variable.shape, [3, len(variable.name)]) * 0.1
                    + (1.0 if "gamma" in variable.name else 0.0))
  return model


def inputs(batch, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, SEQ + 1, size=batch)
  mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
  ids = rng.integers(5, CONFIG.vocab_size, size=(batch, SEQ)).astype(np.int32) * mask
  types = ((np.arange(SEQ)[None] >= lengths[:, None] // 2) * mask).astype(np.int32)
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
  folder = tmp_path_factory.mktemp("tflite")
  model = randomise(AlbertClassifier(CONFIG, num_labels=3))
  files = {}
  for quantize in (False, True):
    files[quantize] = str(folder / f"classifier-{quantize}.tflite")
    export_classifier_tflite(model, files[quantize], SEQ, quantize=quantize)
  return model, files, folder


def test_quantized_classifier_is_a_quarter_of_the_float_file_with_close_logits(classifier):
  model, files, _ = classifier
  float_size, int8_size = (tf.io.gfile.stat(files[q]).length for q in (False, True))
  assert float_size > 4 * model.count_params()
  assert int8_size < 0.45 * float_size
  x = inputs(batch=32)
  want = model(x, training=False).numpy()
  np.testing.assert_allclose(tflite_logits(files[False], **x), want, atol=1e-4)
  got = tflite_logits(files[True], **x)
  assert got.shape == (32, 3)
  # Stated tolerance 0.05 absolute: int8 weights with a scale per output channel round each
  # weight by up to 1/254 of its channel's largest, which moves these logits (up to about 0.75)
  # by at most 0.012 (seen over three random batches): 4x headroom, and still below the gap
  # between the top two logits of almost every row, so argmax stays.
  np.testing.assert_allclose(got, want, atol=0.05)
  assert np.mean(got.argmax(-1) == want.argmax(-1)) >= 0.9


def test_tflite_logits_feeds_a_fixed_batch_in_chunks_and_a_resizable_one_whole(classifier):
  model, files, folder = classifier
  fixed = str(folder / "classifier-batch2.tflite")
  export_classifier_tflite(model, fixed, SEQ, batch_size=2)
  x = inputs(batch=5, seed=1)  # two full chunks and one padded
  want = model(x, training=False).numpy()
  np.testing.assert_allclose(tflite_logits(fixed, **x), want, atol=1e-4)
  np.testing.assert_allclose(tflite_logits(files[False], **x), want, atol=1e-4)
  assert not any(name.endswith(".tmp") for name in tf.io.gfile.listdir(str(folder)))


def test_quantized_encoder_tflite_is_a_quarter_of_its_float32_weights_with_close_outputs(
    tmp_path):
  model = randomise(AlbertPretrainer(CONFIG))
  path = str(tmp_path / "encoder.tflite")
  # The encoder SavedModel's serving_default, converted in-process (export_tflite converts it
  # after loading the SavedModel; saving one would take this test 7 s more).
  serving = EncoderExport(model).serving
  size = export_serving_tflite(lambda inputs: serving(**inputs), path, SEQ, quantize=True,
                               batch_size=1)
  assert size < 0.45 * 4 * model.encoder.count_params()  # float32: 4 bytes a weight and more
  x = inputs(batch=3, seed=2)
  got = run_tflite(path, x)  # batch 1 in the file: fed row by row
  want = model.encoder(x, training=False)
  # Stated tolerance 0.1 absolute: int8 weights move the tanh-bounded pooled output by 0.02 and
  # the layer-normed sequence output (up to about 4) by 0.04 here; 0.1 leaves headroom and is
  # still small against the outputs' own scale.
  np.testing.assert_allclose(got["pooled_output"], want["pooled_output"], atol=0.1)
  np.testing.assert_allclose(got["sequence_output"], want["sequence_output"], atol=0.1)
