"""Dynamic-range int8 TFLite: the encoder and the classifier, a quarter of the size, computing
exactly the int8 scheme of tests/fake_quant.py on their float32 twins.

Converted in-process from a tiny model (tiny.json: 97% of its 0.49M weights are the [30000, 16]
embedding table, so weights dominate the file as they do for ALBERT-base).
"""

import zlib

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.export.encoder import EncoderExport
from albert_tf.export.tflite import (export_classifier_tflite, export_serving_tflite, run_tflite,
                                     tflite_logits)
from albert_tf.modeling.classifier import AlbertClassifier
from conftest import ROOT, float32_atol
from fake_quant import check_tflite_int8

SEQ = 16
CONFIG = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
# A float32 file against the Keras model: each value ends L blocks of sums of I (and H) terms.
TERMS = CONFIG.num_hidden_layers * (CONFIG.intermediate_size + CONFIG.hidden_size)


def randomise(model):
  """Non-trivial values everywhere (initial ones give near-zero logits, where argmax is noise)."""
  for variable in model.trainable_variables:
    seed = [3, zlib.crc32(variable.name.encode())]  # its own values (query's differ from value's)
    variable.assign(tf.random.stateless_normal(variable.shape, seed) * 0.1
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


def test_quantized_classifier_is_a_quarter_of_the_float_file_and_computes_the_int8_scheme(
    classifier):
  model, files, _ = classifier
  float_size, int8_size = (tf.io.gfile.stat(files[q]).length for q in (False, True))
  assert float_size > 4 * model.count_params()
  assert int8_size < 0.45 * float_size
  x = inputs(batch=32)
  want = model(x, training=False).numpy()
  np.testing.assert_allclose(tflite_logits(files[False], **x), want, rtol=0,
                             atol=float32_atol(want, TERMS))
  # The int8 file is the float32 one quantized by the reference, operation by operation: the
  # shared block's 6 kernels in 2 layers and the pooler are hybrid (the 16 -> 32 projection
  # and the 32 -> 3 head have under 1,024 weights and stay float32).
  assert check_tflite_int8(files[True], files[False], x) == 2 * 6 + 1
  got = tflite_logits(files[True], **x)
  assert got.shape == (32, 3)
  # The argmax stays wherever int8 moves the logits by less than half the gap between the top
  # two (its movement from float32 measured on these rows).
  top2 = np.sort(want, axis=-1)[:, -2:]
  clear = top2[:, 1] - top2[:, 0] > 2 * np.max(np.abs(got - want))
  assert clear.mean() > 0.5
  np.testing.assert_array_equal(got.argmax(-1)[clear], want.argmax(-1)[clear])


def test_tflite_logits_feeds_a_fixed_batch_in_chunks_and_a_resizable_one_whole(classifier):
  model, files, folder = classifier
  fixed = str(folder / "classifier-batch2.tflite")
  export_classifier_tflite(model, fixed, SEQ, batch_size=2)
  x = inputs(batch=5, seed=1)  # two full chunks and one padded
  want = model(x, training=False).numpy()
  atol = float32_atol(want, TERMS)
  np.testing.assert_allclose(tflite_logits(fixed, **x), want, rtol=0, atol=atol)
  np.testing.assert_allclose(tflite_logits(files[False], **x), want, rtol=0, atol=atol)
  assert not any(name.endswith(".tmp") for name in tf.io.gfile.listdir(str(folder)))


def test_quantized_encoder_tflite_is_a_quarter_of_its_float32_weights_and_the_int8_scheme(
    tmp_path):
  model = randomise(AlbertPretrainer(CONFIG))
  paths = {q: str(tmp_path / f"encoder-{q}.tflite") for q in (False, True)}
  # The encoder SavedModel's serving_default, converted in-process (export_tflite converts it
  # after loading the SavedModel; saving one would take this test 7 s more).
  serving = EncoderExport(model).serving
  sizes = {q: export_serving_tflite(lambda inputs: serving(**inputs), path, SEQ, quantize=q,
                                    batch_size=1) for q, path in paths.items()}
  assert sizes[True] < 0.45 * 4 * model.encoder.count_params()  # float32: 4 bytes a weight
  x = inputs(batch=3, seed=2)
  got = run_tflite(paths[False], x)  # batch 1 in the file: fed row by row
  want = model.encoder(x, training=False)
  for name in ("pooled_output", "sequence_output"):
    np.testing.assert_allclose(got[name], want[name], rtol=0, atol=float32_atol(want[name], TERMS))
  for row in range(3):
    assert check_tflite_int8(paths[True], paths[False], {k: v[row:row + 1] for k, v in x.items()}
                             ) == 2 * 6 + 1
