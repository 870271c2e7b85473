"""TF Model Garden's ALBERT (`official.nlp`): its TF2 checkpoints, read and written.

    weights = sources.read("albert_tf2/ckpt-1")   # detected as "model_garden"
    weights.arrays["bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"]
    # python -m albert_tf.cli.convert --from=tf1 --to=model_garden ... writes one back

What is read: an object-based checkpoint of Model Garden's `networks.AlbertEncoder`, as
`official/nlp/tools/tf2_albert_encoder_checkpoint_converter.py` writes it
(`tf.train.Checkpoint(encoder=...)`, or whatever name `--checkpoint_model_name` gave), and
one of a pretrainer holding such an encoder: `BertPretrainerV2.checkpoint_items` (`encoder=`,
`masked_lm=`), a `tf.train.Checkpoint(model=...)` of it or of the older `BertPretrainer`
(whose two-class `classification` on the pooled output is the original's sentence-order
head), training checkpoints with their optimizer included (its slots are skipped).

Variables are found by their Keras names (`transformer/self_attention/query/kernel`), which
every such checkpoint records beside the object path (`encoder/layer_with_weights-5/...`) in
its object graph: the path depends on how the model was wrapped, the name does not. The same
names are those of a TF Hub SavedModel that Model Garden's `export_tfhub` writes (tfhub.py
reads it with `to_tf1` below). Model Garden splits attention weights by head
(`query/kernel` [H, heads, H / heads]); the original's are [H, H], the same numbers in the
same order.

Model Garden's checkpoints carry no config: an `albert_config.json` beside the checkpoint is
taken (a conversion to model_garden writes one), else --albert_config_file is needed.
"""

import logging
import os
import re
import shutil

from google.protobuf.message import DecodeError
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf.config import CONFIG_NAME, AlbertConfig
from albert_tf.interop import checkpoints, sources, tf1_names

logger = logging.getLogger(__name__)

FORMAT = "model_garden"
DESCRIPTION = ("a Model Garden TF2 checkpoint (official.nlp AlbertEncoder or a pretrainer "
               "holding one)")
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
CHECKPOINT_PREFIX = "ckpt"  # what `write` names its checkpoint (ckpt-1.index, ...)

_BLOCK = "bert/encoder/transformer/group_0/inner_group_0/"
# Model Garden's Keras variable names -> the original's, and how a value is reshaped
# ("heads": [.., heads, head_size] -> [.., H]; "heads_in": [heads, head_size, H] -> [H, H];
# "transpose": a Dense kernel [H, 2] -> the original's output_weights [2, H]).
NAMES = {
    "word_embeddings/embeddings": ("bert/embeddings/word_embeddings", None),
    "position_embedding/embeddings": ("bert/embeddings/position_embeddings", None),
    "type_embeddings/embeddings": ("bert/embeddings/token_type_embeddings", None),
    "embeddings/layer_norm/gamma": ("bert/embeddings/LayerNorm/gamma", None),
    "embeddings/layer_norm/beta": ("bert/embeddings/LayerNorm/beta", None),
    "embedding_projection/kernel": ("bert/encoder/embedding_hidden_mapping_in/kernel", None),
    "embedding_projection/bias": ("bert/encoder/embedding_hidden_mapping_in/bias", None),
    "transformer/self_attention/query/kernel": (_BLOCK + "attention_1/self/query/kernel",
                                                "heads"),
    "transformer/self_attention/query/bias": (_BLOCK + "attention_1/self/query/bias", "heads"),
    "transformer/self_attention/key/kernel": (_BLOCK + "attention_1/self/key/kernel", "heads"),
    "transformer/self_attention/key/bias": (_BLOCK + "attention_1/self/key/bias", "heads"),
    "transformer/self_attention/value/kernel": (_BLOCK + "attention_1/self/value/kernel",
                                                "heads"),
    "transformer/self_attention/value/bias": (_BLOCK + "attention_1/self/value/bias", "heads"),
    "transformer/self_attention/attention_output/kernel": (
        _BLOCK + "attention_1/output/dense/kernel", "heads_in"),
    "transformer/self_attention/attention_output/bias": (
        _BLOCK + "attention_1/output/dense/bias", None),
    "transformer/self_attention_layer_norm/gamma": (_BLOCK + "LayerNorm/gamma", None),
    "transformer/self_attention_layer_norm/beta": (_BLOCK + "LayerNorm/beta", None),
    "transformer/intermediate/kernel": (_BLOCK + "ffn_1/intermediate/dense/kernel", None),
    "transformer/intermediate/bias": (_BLOCK + "ffn_1/intermediate/dense/bias", None),
    "transformer/output/kernel": (_BLOCK + "ffn_1/intermediate/output/dense/kernel", None),
    "transformer/output/bias": (_BLOCK + "ffn_1/intermediate/output/dense/bias", None),
    "transformer/output_layer_norm/gamma": (_BLOCK + "LayerNorm_1/gamma", None),
    "transformer/output_layer_norm/beta": (_BLOCK + "LayerNorm_1/beta", None),
    "pooler_transform/kernel": ("bert/pooler/dense/kernel", None),
    "pooler_transform/bias": ("bert/pooler/dense/bias", None),
    # layers.MaskedLM (named "cls/predictions" inside "bert" by the pretrainers).
    "cls/predictions/transform/dense/kernel": ("cls/predictions/transform/dense/kernel", None),
    "cls/predictions/transform/dense/bias": ("cls/predictions/transform/dense/bias", None),
    "cls/predictions/transform/LayerNorm/gamma": ("cls/predictions/transform/LayerNorm/gamma",
                                                  None),
    "cls/predictions/transform/LayerNorm/beta": ("cls/predictions/transform/LayerNorm/beta",
                                                 None),
    "cls/predictions/output_bias/bias": ("cls/predictions/output_bias", None),
    # BertPretrainer's networks.Classification on the pooled output.
    "predictions/transform/logits/kernel": ("cls/seq_relationship/output_weights", "transpose"),
    "predictions/transform/logits/bias": ("cls/seq_relationship/output_bias", None),
}
_TF1_OF = {tf1: (mg, how) for mg, (tf1, how) in NAMES.items()}
# Longest first, so that `transformer/output/kernel` never claims `.../attention_output/kernel`.
_SUFFIXES = sorted(NAMES, key=len, reverse=True)
_BERT_LAYER = re.compile(r"(^|/)transformer/layer_\d+/")
# Optimizer state in a training checkpoint: never model weights.
_TRAINING_STATE = re.compile(r"(^|/)\.OPTIMIZER_SLOT/|^(optimizer|save_counter|global_step)/")


class ModelGardenError(checkpoints.CheckpointError):
  """A Model Garden artifact that does not hold an ALBERT this package can load."""


def _keras_name(name):
  """A variable's name without its `:0`."""
  return re.sub(r":\d+$", "", name)


def _known_suffix(name):
  """The NAMES key `name` ends with (after a `/`, or the whole name), or None."""
  for suffix in _SUFFIXES:
    if name == suffix or name.endswith("/" + suffix):
      return suffix
  return None


def _to_original(value, how, shape_only):
  shape = list(value) if shape_only else list(value.shape)
  if how == "heads":  # [.., heads, head_size] -> [.., heads * head_size]
    new = shape[:-2] + [int(np.prod(shape[-2:]))] if len(shape) >= 2 else shape
  elif how == "heads_in":  # [heads, head_size, H] -> [heads * head_size, H]
    new = [int(np.prod(shape[:-1]))] + shape[-1:] if len(shape) >= 2 else shape
  elif how == "transpose":
    new = shape[::-1]
  else:
    new = shape
  if shape_only:
    return new
  return np.transpose(value) if how == "transpose" else np.reshape(value, new)


def to_tf1(named, path, shape_only=False):
  """Model Garden's {Keras variable name: ndarray (or shape)} as the original's.

  Returns ({TF1 name: value}, {TF1 name: Keras name}, [Keras names with no TF1 counterpart]).
  Refuses a BERT encoder (one block per layer), two variables for one weight, and an encoder
  with a weight missing, naming `path` and the variable.
  """
  arrays, source, unused = {}, {}, []
  for name in sorted(named):
    keras = _keras_name(name)
    if _BERT_LAYER.search(keras):
      raise ModelGardenError(
          f"{path} holds a BERT encoder, not ALBERT: its variable '{keras}' belongs to one of "
          "per-layer transformer blocks ('transformer/layer_0', 'transformer/layer_1', ...), "
          "where ALBERT has one block ('transformer/...') shared by every layer")
    suffix = _known_suffix(keras)
    if suffix is None:
      unused.append(keras)
      continue
    tf1, how = NAMES[suffix]
    if tf1 in arrays:
      raise ModelGardenError(f"{path} holds two variables for the original's '{tf1}': "
                             f"'{source[tf1]}' and '{keras}' (two models in one checkpoint?)")
    if how == "transpose" and list(_shape(named[name], shape_only))[-1:] != [2]:
      unused.append(keras)  # a classifier of another kind than the two-class sentence order
      continue
    arrays[tf1] = _to_original(named[name], how, shape_only)
    source[tf1] = keras
  _check_complete(arrays, path)
  return arrays, source, unused


def _shape(value, shape_only):
  return value if shape_only else value.shape


def _check_complete(arrays, path):
  """Every encoder weight is there (the E -> H projection when E != H); the MLM head is whole
  or absent."""
  if not any(n.startswith("bert/") for n in arrays):
    raise ModelGardenError(f"{path} holds no ALBERT encoder weights (no Model Garden "
                           "AlbertEncoder variable such as 'transformer/self_attention/query/"
                           "kernel' or 'word_embeddings/embeddings')")
  needed = [tf1 for tf1 in _TF1_OF if tf1.startswith("bert/")]
  word = arrays.get("bert/embeddings/word_embeddings")
  pooler = arrays.get("bert/pooler/dense/kernel")
  if word is not None and pooler is not None and _last(word) == _last(pooler):
    needed = [n for n in needed if "embedding_hidden_mapping_in" not in n]
  if any(n.startswith("cls/predictions/") for n in arrays):
    needed += [tf1 for tf1 in _TF1_OF if tf1.startswith("cls/predictions/")]
  missing = [n for n in needed if n not in arrays]
  if missing:
    raise ModelGardenError(
        f"{path} lacks the variable '{_TF1_OF[missing[0]][0]}' (the original's "
        f"'{missing[0]}')" + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
        + ": an incomplete or damaged checkpoint, or not an AlbertEncoder's")


def _last(value):
  shape = value if isinstance(value, list) else list(value.shape)
  return shape[-1]


def variable_keys(reader, path):
  """{Keras variable name: checkpoint key} of an object-based checkpoint (its object graph's
  `full_name` of each variable), optimizer state left out."""
  if not reader.has_tensor(OBJECT_GRAPH):
    raise ModelGardenError(f"{path} is not an object-based (TF2) checkpoint")
  # Read like any variable: a truncated data file (a TF Hub download cut short) is named.
  serialized = checkpoints._read_tensors(  # pylint: disable=protected-access
      reader, [OBJECT_GRAPH], path)[OBJECT_GRAPH]
  try:
    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(serialized)
  except DecodeError as e:
    raise ModelGardenError(f"cannot read the object graph of checkpoint {path}: {e} (are its "
                           ".data files damaged or truncated?)") from None
  keys = {}
  for node in graph.nodes:
    for attribute in node.attributes:
      key = attribute.checkpoint_key
      if attribute.name != "VARIABLE_VALUE" or _TRAINING_STATE.search(key):
        continue
      keys[attribute.full_name] = key
  return keys


def read_named(prefix, shape_only=False):
  """{Keras variable name: ndarray (or shape)} of the checkpoint at `prefix`."""
  reader = checkpoints.open_reader(prefix)
  keys = variable_keys(reader, prefix)
  shapes = reader.get_variable_to_shape_map()
  keys = {name: key for name, key in keys.items() if key in shapes}
  if shape_only:
    return {name: list(shapes[key]) for name, key in keys.items()}
  read_tensors = checkpoints._read_tensors  # pylint: disable=protected-access
  by_key = read_tensors(reader, sorted(keys.values()), prefix)
  return {name: by_key[key] for name, key in keys.items()}


def heads_of(named):
  """The number of attention heads the query kernel [H, heads, head_size] is split into."""
  for name, value in named.items():
    if _known_suffix(_keras_name(name)) == "transformer/self_attention/query/kernel":
      shape = value if isinstance(value, list) else list(value.shape)
      return shape[1] if len(shape) == 3 else None
  return None


def check_config(config, named, path, config_source):
  """Refuses a config whose head count differs from the weights' (the one fact of the config
  that the original's [H, H] shapes cannot show, so the loader could not catch it)."""
  heads = heads_of(named)
  if heads is not None and config.num_attention_heads != heads:
    raise ModelGardenError(
        f"{config_source} says num_attention_heads={config.num_attention_heads}, but the "
        f"variable 'transformer/self_attention/query/kernel' of {path} is split into {heads} "
        "heads")


# --- reading ----------------------------------------------------------------------------------
def _prefix(path):
  """The checkpoint prefix of `path`, or None when it is no checkpoint (or a SavedModel)."""
  path = os.fspath(path)
  if os.path.isdir(path) and os.path.exists(os.path.join(path, "saved_model.pb")):
    return None
  try:
    return checkpoints.resolve_checkpoint_path(path)
  except (FileNotFoundError, ValueError, tf.errors.OpError):
    return None


def detect(path):
  """Whether `path` is an object-based checkpoint of a Model Garden transformer encoder (its
  attention layers' object path `_attention_layer/_query_dense`, which neither the original's
  nor our checkpoints have)."""
  prefix = _prefix(path)
  if prefix is None:
    return False
  try:
    names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError):
    return False
  return OBJECT_GRAPH in names and any("/_attention_layer/_query_dense/" in n for n in names)


def _beside(directory):
  """(config dict, config file, spm model, vocab file) found beside a checkpoint."""
  config = config_file = spm_model_file = vocab_file = None
  candidate = os.path.join(directory, CONFIG_NAME)
  if os.path.exists(candidate):
    config_file = candidate
    config = AlbertConfig.from_json_file(candidate).to_dict()
  models = sorted(f for f in os.listdir(directory) if f.endswith(".model"))
  if len(models) == 1:
    spm_model_file = os.path.join(directory, models[0])
  if os.path.exists(os.path.join(directory, "vocab.txt")):
    vocab_file = os.path.join(directory, "vocab.txt")
  return config, config_file, spm_model_file, vocab_file


def read(path, with_arrays=True):
  """`path` (a checkpoint prefix, its directory or its .index) as `sources.ForeignWeights`."""
  prefix = _prefix(path)
  if prefix is None:
    raise FileNotFoundError(f"{path} is not a Model Garden TF2 checkpoint (no checkpoint "
                            "prefix, .index file or directory holding one)")
  config, config_file, spm_model_file, vocab_file = _beside(os.path.dirname(prefix) or ".")
  named = read_named(prefix, shape_only=not with_arrays)
  arrays, _, unused = to_tf1(named, prefix, shape_only=not with_arrays)
  if config is not None:
    check_config(AlbertConfig.from_dict(config), named, prefix, config_file)
  return sources.ForeignWeights(FORMAT, prefix, arrays if with_arrays else {}, config,
                                spm_model_file, vocab_file, None, unused, None, config_file,
                                num_attention_heads=heads_of(named))


# --- writing ----------------------------------------------------------------------------------
def activation(name):
  """Model Garden's activation for an albert_config.json `hidden_act`: its "gelu" is the
  original's tanh approximation, Keras' own gelu the exact one."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  from official.modeling import tf_utils  # pylint: disable=g-import-not-at-top
  if name.lower() == "gelu_exact":
    return tf_keras.activations.gelu
  return tf_utils.get_activation(name.lower())


def check_expressible(config, head):
  """Refuses what Model Garden's AlbertEncoder cannot hold: one block shared by all layers,
  post-LayerNorm, Google's layout; an encoder, or a pretrainer's masked LM."""
  if head not in ("encoder", "pretraining", "masked_lm"):
    raise ValueError(f"--to=model_garden writes Model Garden's AlbertEncoder (and a "
                     f"pretrainer's masked-LM head); this model's {head} head has no place "
                     "there: --head=encoder converts its encoder alone")
  reasons = []
  if config.num_hidden_groups != 1 or config.inner_group_num != 1:
    reasons.append(f"num_hidden_groups={config.num_hidden_groups} and inner_group_num="
                   f"{config.inner_group_num} (Model Garden shares one block: 1 and 1)")
  for key, default in (("sharing", "all"), ("ln_type", "postln"), ("layout", "google")):
    if getattr(config, key, default) != default:
      reasons.append(f"{key}={getattr(config, key)!r} (Model Garden's is {default!r})")
  if reasons:
    raise ValueError("Model Garden's AlbertEncoder cannot hold this model: "
                     + "; ".join(reasons))


def build_encoder(config):
  """Model Garden's AlbertEncoder for `config`, as tf2_albert_encoder_checkpoint_converter.py
  builds it."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import networks  # pylint: disable=g-import-not-at-top
  return networks.AlbertEncoder(
      vocab_size=config.vocab_size, hidden_size=config.hidden_size,
      embedding_width=config.embedding_size, num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size, activation=activation(config.hidden_act),
      dropout_rate=config.hidden_dropout_prob,
      attention_dropout_rate=config.attention_probs_dropout_prob,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      initializer=tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range))


def build_pretrainer(config, encoder):
  """Model Garden's BertPretrainerV2 around `encoder` (its masked LM built)."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import models  # pylint: disable=g-import-not-at-top
  pretrainer = models.BertPretrainerV2(
      encoder_network=encoder, mlm_activation=activation(config.hidden_act),
      mlm_initializer=tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range))
  pretrainer(pretrainer.inputs)
  return pretrainer


def _assign(variables, arrays, what):
  """Model Garden's `variables` from the original's `arrays`; returns the TF1 names used."""
  used = []
  for variable in variables:
    keras = _keras_name(variable.name)
    suffix = _known_suffix(keras)
    if suffix is None:
      raise ValueError(f"Model Garden's {what} has a variable '{keras}' that albert-tf does "
                       "not know (another tf-models-official version?)")
    tf1, how = NAMES[suffix]
    if tf1 not in arrays:
      raise ValueError(f"the model converted has no '{tf1}' for Model Garden's '{keras}'")
    value = arrays[tf1]
    value = np.transpose(value) if how == "transpose" else np.reshape(value, variable.shape)
    variable.assign(value)
    used.append(tf1)
  return used


def write(converted, directory):
  """`convert.Converted` as a Model Garden checkpoint in `directory` (ckpt-1), with its
  albert_config.json and vocabulary beside it.

  An encoder is written as `tf.train.Checkpoint(encoder=AlbertEncoder)`, what
  tf2_albert_encoder_checkpoint_converter.py writes; a pretrainer with its masked LM as
  `BertPretrainerV2.checkpoint_items` (`encoder=`, `masked_lm=`), what export_tfhub's
  model_with_mlm reads. Both restore into `tf.train.Checkpoint(encoder=AlbertEncoder(...))`.
  """
  c = converted
  check_expressible(c.config, c.head)
  assigned = {v.ref() for v in c.report.assigned}
  arrays = {name: variable.numpy()
            for name, variable in tf1_names.tf1_variable_map(c.model).items()
            if variable.ref() in assigned}
  missing = [n for n in tf1_names.tf1_variable_map(tf1_names.find_encoder(c.model))
             if n not in arrays]
  if missing:
    raise ValueError(f"the source has no {', '.join(missing[:3])}: Model Garden's "
                     "AlbertEncoder would hold initial values there")
  encoder = build_encoder(c.config)
  used = _assign(encoder.variables, arrays, "AlbertEncoder")
  items = {"encoder": encoder}
  if any(n.startswith("cls/predictions/") for n in arrays):
    pretrainer = build_pretrainer(c.config, encoder)
    used += _assign(pretrainer.masked_lm.variables, arrays, "masked LM")
    items = pretrainer.checkpoint_items
  dropped = sorted(set(arrays) - set(used))
  if dropped:
    logger.warning("Model Garden's AlbertEncoder and masked LM have no place for %s: not "
                   "written", ", ".join(dropped))
  tf.train.Checkpoint(**items).save(os.path.join(directory, CHECKPOINT_PREFIX))
  c.config.to_json_file(os.path.join(directory, CONFIG_NAME))
  for source in (c.spm_model_file, c.vocab_file):
    if source:
      shutil.copyfile(source, os.path.join(directory, os.path.basename(source)))


sources.register(FORMAT, DESCRIPTION, detect, read)
