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
Every signature checks its request first (export/requests.py): each input's rank, the three
inputs of one shape, 1 to max_position_embeddings columns, ids inside the vocabulary and type
vocabulary, a 0/1 mask, masked_lm_positions inside the row; a request that breaks a rule is an
INVALID_ARGUMENT naming the input, an empty batch gets empty outputs.
With `jit_compile=True` the signatures are compiled by XLA as one cluster each (ALBERT-base
on a 2-core CPU, seq 128: about 0.85x the plain graph's latency at batch 1, 0.87x at batch 32;
docs/benchmarks-history.md). XLA compiles
once per input shape, and TF Serving runs such a model only when started with
`--xla_cpu_compilation_enabled=true` (an experimental flag), so the default is a plain graph.
Loaded with `albert_tf.load_saved_model` (or `hub.KerasLayer(load_saved_model(path),
trainable=True)`) the object is also callable like the Keras encoder: a dict of inputs -> a dict
with `encoder_outputs` as a list, and its variables are trainable, so fine-tuning can start from
the export. (Plain `tf.saved_model.load` and `hub.KerasLayer(path)` work too, but each of their
loads keeps its custom gradients' graphs for the life of the process: see FINE_TUNABLE.)
"""

import tensorflow as tf

from albert_tf.export import requests
from albert_tf.export.saving import save_atomically
from albert_tf.export.tflite import export_serving_tflite
from albert_tf.interop.saved_models import load_saved_model
from albert_tf.modeling.encoder import INPUT_NAMES


# Unlike the serving exports (export/saving.py), the encoder keeps its custom gradients: it is
# fine-tuned through (`hub.KerasLayer(..., trainable=True)`; --init_checkpoint only copies its
# weights), and each of modeling/'s `tf.custom_gradient` functions ends in an IdentityN whose
# gradient TensorFlow finds only in that saved registration: saved without, tape.gradient
# through the loaded encoder raises LookupError (TF 2.20; autodiff does not fall back to the
# forward ops). Loads through interop/saved_models.py's `load_saved_model` release the
# registrations with the loaded object.
FINE_TUNABLE = tf.saved_model.SaveOptions(experimental_custom_gradients=True)


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
    # Fine-tuning through `__call__` stays a plain graph; the signatures may be XLA-compiled.
    # (None, not False: an explicit False also writes an `_XlaMustCompile` attribute.)
    jit_compile = True if jit_compile else None
    request = {name: f"int32 [batch, {max_seq_length or 'seq'}]" for name in INPUT_NAMES}
    self.serving = self._signature(self._serving, request, jit_compile)
    self.mlm = self._signature(self._mlm, dict(request, masked_lm_positions="int32 [batch, P]"),
                               jit_compile)
    self.lean = self._signature(self._lean, request, jit_compile)
    self.__call__ = tf.function(self._call, input_signature=[_input_specs(max_seq_length),
                                                              tf.TensorSpec([], tf.bool)])

  def _signature(self, compute, request, jit_compile):
    """A signature that checks its `request` (export/requests.py), then runs `compute`: XLA
    drops Assert ops, so the checks sit in a plain function around a compiled `compute`."""
    compute = tf.function(compute, jit_compile=jit_compile)
    config = self.encoder.config

    @requests.signature(**request)
    def serve(**inputs):
      rules = requests.encoder_inputs(inputs, config)
      if "masked_lm_positions" in inputs:
        positions, words = inputs["masked_lm_positions"], inputs["input_word_ids"]
        rules += requests.same_rows(input_word_ids=words, masked_lm_positions=positions)
        rules.append(requests.values_in("masked_lm_positions", positions, 0,
                                        tf.shape(words)[1], "positions",
                                        " (the columns of input_word_ids)"))
      return compute(requests.checked(inputs, rules))
    return serve

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
  TF Serving's warm-up requests go in its assets.extra/ (export/warmup.py).
  """
  module = EncoderExport(pretrainer, max_seq_length, jit_compile)
  return save_atomically(module, export_dir, {"serving_default": module.serving,
                                              "mlm": module.mlm, "lean": module.lean},
                         options=FINE_TUNABLE)


def export_tflite(saved_model_dir, tflite_file, max_seq_length=128, batch_size=1,
                  quantize=False):
  """Converts the serving signature at a fixed [batch, seq] shape; returns the file size.

  `quantize`: dynamic-range int8 weights, about a quarter of the size (export/tflite.py).
  """
  loaded = load_saved_model(saved_model_dir)  # kept: its signature holds variables weakly
  serving = loaded.signatures["serving_default"]
  return export_serving_tflite(lambda inputs: serving(**inputs), tflite_file, max_seq_length,
                               quantize, batch_size)
