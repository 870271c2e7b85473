"""The encoder as a TF-Hub-style SavedModel (and TFLite), from a checkpoint of ours or the original.

Signatures (what TF Serving and `saved_model_cli run` call), batch first so REST's
`{"instances": [...]}` row format works:
  serving_default: input_word_ids, input_mask, input_type_ids  int32 [batch, seq]
      -> pooled_output float32 [batch, hidden], sequence_output [batch, seq, hidden],
         encoder_outputs [batch, L * inner_group_num, seq, hidden] (every block application)
  mlm: the same inputs plus masked_lm_positions int32 [batch, P]
      -> mlm_logits float32 [batch, P, vocab], plus the serving_default outputs
  lean: the serving_default inputs -> pooled_output and sequence_output only (no stacked
      copy of every layer's output: what a client that wants no encoder_outputs should call)
With `jit_compile=True` the signatures are compiled by XLA as one cluster each (ALBERT-base
on a 2-core CPU, seq 128: about 0.85x the plain graph's latency at batch 1, 0.87x at batch 32;
BENCHMARKS.md). XLA compiles
once per input shape, and TF Serving runs such a model only when started with
`--xla_cpu_compilation_enabled=true` (an experimental flag), so the default is a plain graph.
Loaded with `tf.saved_model.load` (or `hub.KerasLayer(path, trainable=True)`) the object is
also callable like the Keras encoder: a dict of inputs -> a dict with `encoder_outputs` as a
list, and its variables are trainable, so fine-tuning can start from the export.
"""

import tensorflow as tf

from albert_tf.export.tflite import export_serving_tflite
from albert_tf.modeling.activations import plain_activations
from albert_tf.modeling.encoder import INPUT_NAMES


def _input_specs(max_seq_length=None):
  return {name: tf.TensorSpec([None, max_seq_length], tf.int32, name=name)
          for name in INPUT_NAMES}


def _lean(outputs):
  """pooled and sequence outputs, float32 also when the encoder computes in bfloat16/float16."""
  return {"pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
          "sequence_output": tf.cast(outputs["sequence_output"], tf.float32)}


def _stacked(outputs):
  """`_lean`'s outputs plus every block's output stacked as `encoder_outputs`."""
  return dict(_lean(outputs), encoder_outputs=tf.cast(
      tf.stack(outputs["encoder_outputs"], axis=1), tf.float32))


class EncoderExport(tf.Module):
  """What the encoder SavedModel holds: the Keras encoder (and MLM head) plus signatures.

  It follows TF-Hub's reusable SavedModel API (`__call__(inputs, training)`, `variables`,
  `trainable_variables`, `regularization_losses`), which `hub.KerasLayer` fine-tunes.
  """
  # Plain attributes in the saved object (tf.Module defines these as read-only properties).
  variables = None
  trainable_variables = None
  regularization_losses = None

  def __init__(self, pretrainer, max_seq_length=None, jit_compile=False):
    super().__init__(name="albert_encoder")
    self.encoder = pretrainer.encoder
    self.masked_lm = pretrainer.masked_lm
    self.variables = list(self.encoder.variables)
    self.trainable_variables = list(self.encoder.trainable_variables)
    self.regularization_losses = []
    self.config_json = tf.Variable(pretrainer.config.to_json_string(), trainable=False,
                                   name="albert_config_json")
    specs = _input_specs(max_seq_length)
    # Fine-tuning through `__call__` stays a plain graph; the signatures may be XLA-compiled.
    # (None, not False: an explicit False also writes an `_XlaMustCompile` attribute.)
    jit_compile = True if jit_compile else None
    self.serving = tf.function(self._serving, input_signature=[specs], jit_compile=jit_compile)
    mlm_specs = dict(specs, masked_lm_positions=tf.TensorSpec([None, None], tf.int32,
                                                               name="masked_lm_positions"))
    self.mlm = tf.function(self._mlm, input_signature=[mlm_specs], jit_compile=jit_compile)
    self.lean = tf.function(self._lean, input_signature=[specs], jit_compile=jit_compile)
    self.__call__ = tf.function(self._call, input_signature=[specs, tf.TensorSpec([], tf.bool)])

  def _call(self, inputs, training=False):
    return self.encoder(inputs, training=training)

  def _serving(self, inputs):
    return _stacked(self.encoder(inputs, training=False))

  def _lean(self, inputs):
    return _lean(self.encoder(inputs, training=False))

  def _mlm(self, inputs):
    outputs = self.encoder({k: inputs[k] for k in INPUT_NAMES}, training=False)
    result = _stacked(outputs)
    result["mlm_logits"] = tf.cast(
        self.masked_lm(outputs["sequence_output"], inputs["masked_lm_positions"]), tf.float32)
    return result


def export_encoder(pretrainer, export_dir, max_seq_length=None, jit_compile=False):
  """Writes the encoder SavedModel atomically (temporary folder, then rename).

  `jit_compile`: the serving_default and mlm signatures as XLA clusters (see the module doc).
  """
  module = EncoderExport(pretrainer, max_seq_length, jit_compile)
  tmp = export_dir.rstrip("/") + ".tmp"
  if tf.io.gfile.exists(tmp):
    tf.io.gfile.rmtree(tmp)
  with plain_activations():
    tf.saved_model.save(module, tmp, signatures={"serving_default": module.serving,
                                                 "mlm": module.mlm, "lean": module.lean})
  if tf.io.gfile.exists(export_dir):
    tf.io.gfile.rmtree(export_dir)
  tf.io.gfile.rename(tmp, export_dir)
  return export_dir


def export_tflite(saved_model_dir, tflite_file, max_seq_length=128, batch_size=1,
                  quantize=False):
  """Converts the serving signature at a fixed [batch, seq] shape; returns the file size.

  `quantize`: dynamic-range int8 weights, about a quarter of the size (export/tflite.py).
  """
  loaded = tf.saved_model.load(saved_model_dir)  # kept: its signature holds variables weakly
  serving = loaded.signatures["serving_default"]
  return export_serving_tflite(lambda inputs: serving(**inputs), tflite_file, max_seq_length,
                               quantize, batch_size)
