"""Test support: a TF1 Hub module of the original ALBERT, as its `export_to_tfhub.py` wrote
them (TF Hub google/albert_*/1-2), made at test time at any size.

    write_module(directory, config, arrays, spm_model_file)   # arrays: {TF1 name: ndarray}
    hub.load(directory, tags=[]).signatures["tokens"](input_ids=..., input_mask=...,
                                                       segment_ids=...)

The graph is the original's, written here from its modeling.py and export_to_tfhub.py (commit
0c88e1e) in `tf.compat.v1` ops under the original's variable scopes: the embeddings (gather,
token types, a slice of the position table, contrib's layer_norm with epsilon 1e-12), the
factorized embedding projection, `transformer/group_g/inner_group_k` blocks of einsum dense
layers (`attention_1`, `LayerNorm`, `ffn_1`, `LayerNorm_1`, post-LN, tanh-approximated gelu,
mask adder -10000), the tanh pooler on the first token, and the script's heads:
`cls/predictions` (gathered positions, dense + gelu, LayerNorm, tied output embeddings and
`output_bias`) and `cls/seq_relationship`. Its signatures are the script's: `tokens`, `sop`,
`mlm` and `tokenization_info` ({vocab_file: the SentencePiece model asset, do_lower_case}); one
graph per tag set, {"train"} (dropout on) and {} (off), as the script's `tags_and_args`.

tensorflow_hub 0.16 no longer has the TF1 API (`hub.create_module_spec`, `hub.Module`,
`Module.export`: removed in tensorflow/hub f74a32b, "Remove deprecated TF 1 API"), so what
`create_module_spec` and `ModuleSpec.export` did (tensorflow_hub 0.15 native_module.py and
saved_model_lib.py) is done here with TensorFlow's own protos and `tf.compat.v1`:
  - each tag set's graph is built under `variable_scope("", use_resource=True)` and kept as
    `tf.compat.v1.train.export_meta_graph(strip_default_attrs=True)`, with its tags and its
    signatures as SignatureDefs;
  - every Const in the ASSET_FILEPATHS collection gets the value "SAVEDMODEL-ASSET" and an
    AssetFileDef (the file's base name) in the `saved_model_assets` collection; the files are
    copied into `assets/`;
  - the variables are saved by a sharded V2 `tf.compat.v1.train.Saver` under their names in
    the module (`bert/...`, no `module/` prefix) as `variables/variables`;
  - `tfhub_module.pb` is a `tensorflow_hub.ModuleDef` with `format: FORMAT_V3` (= 3).
"""

import json
import math
import os
import pathlib
import shutil

import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

v1 = tf.compat.v1

# tensorflow_hub/module_def.proto: `message ModuleDef { Format format = 1; ... }`, FORMAT_V3 = 3;
# serialized: field 1, wire type varint (0x08), value 3.
MODULE_DEF_FORMAT_V3 = b"\x08\x03"
ASSET_PLACEHOLDER = b"SAVEDMODEL-ASSET"
SPM_ASSET = "30k-clean.model"


# --- the original's model, in tf.compat.v1 ---------------------------------------------------
def _gelu(x):
  return x * 0.5 * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


def _layer_norm(x, scope="LayerNorm"):
  """contrib.layers.layer_norm of TF 1.15 over the last axis (variables beta, gamma)."""
  with v1.variable_scope(scope):
    width = x.shape[-1]
    beta = v1.get_variable("beta", [width], initializer=v1.zeros_initializer())
    gamma = v1.get_variable("gamma", [width], initializer=v1.ones_initializer())
    mean, variance = tf.nn.moments(x, [x.shape.ndims - 1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, beta, gamma, variance_epsilon=1e-12)


def _dropout(x, rate):
  return x if not rate else tf.nn.dropout(x, rate=rate)


def _kernel_and_bias(scope, kernel_shape, bias_shape):
  with v1.variable_scope(scope):
    init = v1.truncated_normal_initializer(stddev=0.02)
    return (v1.get_variable("kernel", kernel_shape, initializer=init),
            v1.get_variable("bias", bias_shape, initializer=v1.zeros_initializer()))


def _dense_2d(x, units, scope, activation=None):
  """modeling.dense_layer_2d (einsum) on [B, S, in]."""
  kernel, bias = _kernel_and_bias(scope, [x.shape[-1], units], [units])
  y = tf.einsum("BFH,HO->BFO", x, kernel) + bias
  return activation(y) if activation else y


def _layers_dense(x, units, activation=None):
  """tf.layers.dense on [N, in]: variables `dense/kernel`, `dense/bias`."""
  kernel, bias = _kernel_and_bias("dense", [x.shape[-1], units], [units])
  y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
  return activation(y) if activation else y


def _attention(x, mask, heads, attention_dropout):
  """modeling.attention_layer + dense_layer_3d_proj: [B, F, H] -> [B, F, H]."""
  hidden = int(x.shape[-1])
  size = hidden // heads
  with v1.variable_scope("self"):
    def project(name):  # dense_layer_3d: kernel [H, N*D] seen as [H, N, D]
      kernel, bias = _kernel_and_bias(name, [hidden, hidden], [hidden])
      y = tf.einsum("BFH,HND->BFND", x, tf.reshape(kernel, [hidden, heads, size]))
      return tf.transpose(y + tf.reshape(bias, [heads, size]), [0, 2, 1, 3])
    q, k, v = project("query"), project("key"), project("value")
    logits = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(float(size)))
    batch, length = tf.shape(x)[0], tf.shape(x)[1]
    to_mask = tf.cast(tf.reshape(mask, [batch, 1, length, 1]), tf.float32)
    bias = tf.matmul(tf.ones([batch, 1, length, 1], tf.float32), to_mask, transpose_b=True)
    probs = _dropout(tf.nn.softmax(logits + (1.0 - bias) * -10000.0), attention_dropout)
    context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
  with v1.variable_scope("output"):
    kernel, bias = _kernel_and_bias("dense", [hidden, hidden], [hidden])
    return tf.einsum("BFND,NDH->BFH", context, tf.reshape(kernel, [heads, size, hidden])) + bias


def _block(x, mask, cfg, hidden_dropout, attention_dropout):
  """modeling.attention_ffn_block (post-LN)."""
  with v1.variable_scope("attention_1"):
    attention = _dropout(_attention(x, mask, cfg["num_attention_heads"], attention_dropout),
                         hidden_dropout)
  attention = _layer_norm(attention + x, "LayerNorm")
  with v1.variable_scope("ffn_1"):
    with v1.variable_scope("intermediate"):
      inner = _dense_2d(attention, cfg["intermediate_size"], "dense", _gelu)
      with v1.variable_scope("output"):
        ffn = _dropout(_dense_2d(inner, cfg["hidden_size"], "dense"), hidden_dropout)
  return _layer_norm(ffn + attention, "LayerNorm_1")


def albert_model(cfg, input_ids, input_mask, segment_ids, is_training):
  """modeling.AlbertModel: (sequence_output, pooled_output, embedding table)."""
  hidden_dropout = cfg.get("hidden_dropout_prob", 0.0) if is_training else 0.0
  attention_dropout = cfg.get("attention_probs_dropout_prob", 0.0) if is_training else 0.0
  init = v1.truncated_normal_initializer(stddev=0.02)
  E, H = cfg["embedding_size"], cfg["hidden_size"]
  with v1.variable_scope("bert"):
    with v1.variable_scope("embeddings"):
      table = v1.get_variable("word_embeddings", [cfg["vocab_size"], E], initializer=init)
      x = tf.gather(table, input_ids)
      types = v1.get_variable("token_type_embeddings", [cfg["type_vocab_size"], E],
                              initializer=init)
      x += tf.gather(types, segment_ids)
      positions = v1.get_variable("position_embeddings", [cfg["max_position_embeddings"], E],
                                  initializer=init)
      x += tf.slice(positions, [0, 0], [tf.shape(input_ids)[1], -1])[tf.newaxis]
      x = _dropout(_layer_norm(x), hidden_dropout)
    with v1.variable_scope("encoder"):
      if E != H:
        x = _dense_2d(x, H, "embedding_hidden_mapping_in")
      layers, groups = cfg["num_hidden_layers"], cfg.get("num_hidden_groups", 1)
      with v1.variable_scope("transformer", reuse=v1.AUTO_REUSE):
        for layer in range(layers):
          with v1.variable_scope(f"group_{int(layer / layers * groups)}"):
            for inner in range(cfg.get("inner_group_num", 1)):
              with v1.variable_scope(f"inner_group_{inner}"):
                x = _block(x, input_mask, cfg, hidden_dropout, attention_dropout)
    with v1.variable_scope("pooler"):
      pooled = _layers_dense(x[:, 0], H, tf.tanh)
  return x, pooled, table


def _mlm_logits(cfg, sequence, positions, table):
  """export_to_tfhub.get_mlm_logits."""
  batch, length = tf.shape(sequence)[0], tf.shape(sequence)[1]
  flat = tf.reshape(positions + tf.range(batch)[:, tf.newaxis] * length, [-1])
  x = tf.gather(tf.reshape(sequence, [-1, cfg["hidden_size"]]), flat)
  with v1.variable_scope("cls/predictions"):
    with v1.variable_scope("transform"):
      x = _layer_norm(_layers_dense(x, cfg["embedding_size"], _gelu))
    bias = v1.get_variable("output_bias", [cfg["vocab_size"]],
                           initializer=v1.zeros_initializer())
    return tf.nn.bias_add(tf.matmul(x, table, transpose_b=True), bias)


def _sop_log_probs(cfg, pooled):
  """export_to_tfhub.get_sop_log_probs."""
  with v1.variable_scope("cls/seq_relationship"):
    weights = v1.get_variable("output_weights", [2, cfg["hidden_size"]],
                              initializer=v1.truncated_normal_initializer(stddev=0.02))
    bias = v1.get_variable("output_bias", [2], initializer=v1.zeros_initializer())
    return tf.nn.log_softmax(tf.nn.bias_add(tf.matmul(pooled, weights, transpose_b=True), bias))


def _signature(inputs, outputs):
  info = v1.saved_model.utils.build_tensor_info
  return v1.saved_model.signature_def_utils.build_signature_def(
      {k: info(t) for k, t in inputs.items()}, {k: info(t) for k, t in outputs.items()})


def module_fn(cfg, asset_files, do_lower_case, is_training):
  """export_to_tfhub.module_fn: the graph of one tag set; returns its signatures."""
  ids, mask, types, positions = (v1.placeholder(tf.int32, [None, None], name) for name in (
      "input_ids", "input_mask", "segment_ids", "mlm_positions"))
  sequence, pooled, table = albert_model(cfg, ids, mask, types, is_training)
  mlm_logits = _mlm_logits(cfg, sequence, positions, table)
  sop_log_probs = _sop_log_probs(cfg, pooled)
  # The script's asset Consts: config_file, vocab_model (the SentencePiece model), vocab_file.
  constants = {name: tf.constant(path, tf.string, name=name)
               for name, path in asset_files.items()}
  for constant in constants.values():
    v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, constant)
  encoder_inputs = dict(input_ids=ids, input_mask=mask, segment_ids=types)
  encoded = dict(sequence_output=sequence, pooled_output=pooled)
  return {
      "tokens": _signature(encoder_inputs, encoded),
      "sop": _signature(encoder_inputs, dict(encoded, sop_log_probs=sop_log_probs)),
      "mlm": _signature(dict(encoder_inputs, mlm_positions=positions),
                        dict(encoded, mlm_logits=mlm_logits)),
      "tokenization_info": _signature({}, dict(vocab_file=constants["vocab_model"],
                                               do_lower_case=tf.constant(do_lower_case))),
  }


# --- the module directory, as create_module_spec + export wrote it ---------------------------
def _meta_graph(graph, signatures, tags):
  """SavedModelHandler.add_graph_copy, then _make_assets_key_collection: the asset Consts
  point into assets/. Returns (MetaGraphDef, {original path: file name in assets/})."""
  with graph.as_default():
    meta_graph = v1.train.export_meta_graph(strip_default_attrs=True)
  meta_graph.meta_info_def.tags.extend(sorted(tags))
  for key, signature in signatures.items():
    meta_graph.signature_def[key].CopyFrom(signature)
  asset_nodes = {t.split(":")[0] for t in
                 meta_graph.collection_def[v1.GraphKeys.ASSET_FILEPATHS].node_list.value}
  assets = meta_graph.collection_def[v1.saved_model.ASSETS_KEY].any_list
  copies = {}
  for node in meta_graph.graph_def.node:
    if node.name in asset_nodes:
      original = node.attr["value"].tensor.string_val[0].decode()
      node.attr["value"].tensor.string_val[0] = ASSET_PLACEHOLDER
      copies[original] = os.path.basename(original)
      asset = meta_graph_pb2.AssetFileDef(filename=copies[original])
      asset.tensor_info.name = node.name + ":0"
      assets.value.add().Pack(asset)
  return meta_graph, copies


def _save_variables(graph, arrays, variables_path):
  """hub.Module.export: the variables, valued from `arrays` {name in the module: ndarray}, by a
  sharded V2 Saver keyed by their names in the module."""
  os.makedirs(os.path.dirname(variables_path))
  with graph.as_default():
    variables = {v.op.name: v for v in v1.global_variables()}
    with v1.Session() as session:
      for name, variable in variables.items():
        variable.load(arrays[name], session)
      v1.train.Saver(variables, sharded=True, write_version=v1.train.SaverDef.V2).save(
          session, variables_path, write_meta_graph=False, write_state=False)


def write_module(directory, cfg, arrays, spm_model_file, do_lower_case=True,
                 with_config=True):
  """Writes the module of `cfg` (an albert_config.json dict) with the weights `arrays` ({TF1
  name: ndarray}, every variable of the graph) into the new folder `directory`.

  Its assets are the SentencePiece model as `30k-clean.model`, and (`with_config`, the v2
  modules and the script) `albert_config.json` and `30k-clean.vocab`; without it only the
  model, as the v1 modules had. Returns `directory` as a pathlib.Path.
  """
  directory = os.fspath(directory)
  source = directory + ".source"  # the "albert_directory" the script reads its files from
  os.makedirs(source)
  shutil.copy(spm_model_file, os.path.join(source, SPM_ASSET))
  asset_files = {"vocab_model": os.path.join(source, SPM_ASSET)}
  if with_config:
    with open(os.path.join(source, "albert_config.json"), "w") as f:
      json.dump(cfg, f, indent=2)
    with open(os.path.join(source, "30k-clean.vocab"), "w") as f:
      f.write("<pad>\t0\n")  # for visualisation only, as the script says
    asset_files.update(config_file=os.path.join(source, "albert_config.json"),
                       vocab_file=os.path.join(source, "30k-clean.vocab"))
  proto = saved_model_pb2.SavedModel()
  copies = {}
  for tags, is_training in (({"train"}, True), (set(), False)):
    with tf.Graph().as_default() as graph:
      with v1.variable_scope("", use_resource=True):
        signatures = module_fn(cfg, asset_files, do_lower_case, is_training)
    meta_graph, graph_copies = _meta_graph(graph, signatures, tags)
    proto.meta_graphs.add().CopyFrom(meta_graph)
    copies.update(graph_copies)
  os.makedirs(os.path.join(directory, "assets"))
  for original, name in copies.items():
    shutil.copy(original, os.path.join(directory, "assets", name))
  _save_variables(graph, arrays, os.path.join(directory, "variables", "variables"))
  with open(os.path.join(directory, "saved_model.pb"), "wb") as f:
    f.write(proto.SerializeToString())
  with open(os.path.join(directory, "tfhub_module.pb"), "wb") as f:
    f.write(MODULE_DEF_FORMAT_V3)
  shutil.rmtree(source)
  return pathlib.Path(directory)
