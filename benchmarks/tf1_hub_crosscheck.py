"""Checks the test's TF1 Hub module (tests/tf1_hub_module.py) against the original's own code.

Not part of the test run: it needs a checkout of the original (google-research/albert),
whose modeling.py and export_to_tfhub.py it imports, as they are, under tf.compat.v1:

    git clone https://github.com/google-research/albert /tmp/albert_src
    TF_USE_LEGACY_KERAS=1 .venv/bin/python benchmarks/tf1_hub_crosscheck.py /tmp/albert_src

For tiny configs (one group; and groups of two inner blocks) it builds the original's
`AlbertModel` and export_to_tfhub.py's `get_mlm_logits` / `get_sop_log_probs` with random
weights, writes the test's module with the same weights, runs its `mlm` and `sop` signatures
with tensorflow_hub, and prints the variable names either side lacks and the largest output
differences. Two shims let their TF1 code run on TF 2: `tensorflow.contrib.layers.layer_norm`
as TF 1.15 had it (beta, gamma; moments, epsilon 1e-12), and `hub.add_signature` (gone from
tensorflow_hub 0.16, and not called here). `TF_USE_LEGACY_KERAS=1` makes `tf.layers.dense` the
Keras 2 one that names variables as TF 1 did. Results are quoted in README.md.
"""

import os
import sys
import tempfile
import types

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM = os.path.join(ROOT, os.pardir, "shared", "data", "sentencepiece", "spiece.model")
CONFIGS = {
    "tiny.json": dict(vocab_size=30000, embedding_size=16, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_hidden_groups=1, inner_group_num=1,
                      num_attention_heads=4, max_position_embeddings=64, type_vocab_size=2,
                      hidden_act="gelu", hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, initializer_range=0.02),
}
CONFIGS["groups_2_inner_2"] = dict(CONFIGS["tiny.json"], num_hidden_layers=4,
                                   num_hidden_groups=2, inner_group_num=2)


def _import_originals(checkout):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_hub as hub  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1

  def layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    del begin_norm_axis, begin_params_axis
    with v1.variable_scope(scope, "LayerNorm", [inputs]):
      shape = inputs.shape[-1:]
      beta = v1.get_variable("beta", shape=shape, initializer=v1.zeros_initializer())
      gamma = v1.get_variable("gamma", shape=shape, initializer=v1.ones_initializer())
      mean, variance = tf.nn.moments(inputs, [inputs.shape.ndims - 1], keepdims=True)
      return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, 1e-12)

  contrib = types.ModuleType("tensorflow.contrib")
  contrib.layers = types.SimpleNamespace(layer_norm=layer_norm)
  sys.modules["tensorflow.contrib"] = contrib
  hub.add_signature = lambda **unused: None
  package = types.ModuleType("albert")  # export_to_tfhub.py imports `from albert import ...`
  package.__path__ = [checkout]
  sys.modules["albert"] = package
  sys.path.insert(0, checkout)
  import export_to_tfhub  # pylint: disable=g-import-not-at-top
  from albert import modeling  # pylint: disable=g-import-not-at-top
  return modeling, export_to_tfhub


def _inputs():
  rng = np.random.default_rng(7)
  mask = np.ones((3, 10), np.int32)
  mask[1, 6:] = 0
  mask[2, 3:] = 0
  ids = (rng.integers(5, 30000, mask.shape) * mask).astype(np.int32)
  types_ = ((np.arange(10)[None] >= [[5], [3], [1]]) * mask).astype(np.int32)
  positions = np.array([[1, 3, 4], [2, 5, 0], [1, 2, 0]], np.int32)
  return ids, mask, types_, positions


def _originals_outputs(modeling, export_to_tfhub, config, arrays):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1
  with tf.Graph().as_default():
    albert_config = modeling.AlbertConfig.from_dict(config)
    ids, mask, types_, positions = (v1.placeholder(tf.int32, [None, None]) for _ in range(4))
    model = modeling.AlbertModel(albert_config, False, ids, mask, types_,
                                 use_one_hot_embeddings=False)
    mlm = export_to_tfhub.get_mlm_logits(model, albert_config, positions)
    sop = export_to_tfhub.get_sop_log_probs(model, albert_config)
    variables = {v.op.name: v for v in v1.global_variables()}
    with v1.Session() as session:
      for name, variable in variables.items():
        if name in arrays:
          variable.load(arrays[name], session)
      feed = dict(zip((ids, mask, types_, positions), _inputs()))
      values = session.run([model.get_sequence_output(), model.get_pooled_output(), mlm, sop],
                           feed)
  return set(variables), dict(zip(("sequence_output", "pooled_output", "mlm_logits",
                                    "sop_log_probs"), values))


def _modules_outputs(config, arrays, directory):
  import tensorflow_hub as hub  # pylint: disable=g-import-not-at-top
  from tf1_hub_module import write_module  # pylint: disable=g-import-not-at-top
  module = write_module(os.path.join(directory, "module"), config, arrays, SPM)
  signatures = hub.load(str(module), tags=[]).signatures
  ids, mask, types_, positions = _inputs()
  mlm = signatures["mlm"](input_ids=ids, input_mask=mask, segment_ids=types_,
                          mlm_positions=positions)
  sop = signatures["sop"](input_ids=ids, input_mask=mask, segment_ids=types_)
  return {"sequence_output": mlm["sequence_output"].numpy(),
          "pooled_output": mlm["pooled_output"].numpy(),
          "mlm_logits": mlm["mlm_logits"].numpy(),
          "sop_log_probs": sop["sop_log_probs"].numpy()}


def main(checkout):
  sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
  import reference_albert as ref  # pylint: disable=g-import-not-at-top
  modeling, export_to_tfhub = _import_originals(os.path.abspath(checkout))
  for name, config in CONFIGS.items():
    arrays = ref.random_tf1_weights(config, heads=True, seed=4)
    names, theirs = _originals_outputs(modeling, export_to_tfhub, config, arrays)
    with tempfile.TemporaryDirectory() as directory:
      ours = _modules_outputs(config, arrays, directory)
    print(f"{name}: variables only in the original's graph {sorted(names - set(arrays))}, "
          f"only in the module {sorted(set(arrays) - names)}")
    for key, value in theirs.items():
      print(f"  {key:16s} max |original - module| = {np.max(np.abs(value - ours[key])):.3g} "
            f"(max |value| {np.max(np.abs(value)):.3g})")


if __name__ == "__main__":
  main(sys.argv[1])
