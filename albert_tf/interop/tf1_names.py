"""The original's TF1 variable names of a model: `{name: tf.Variable}` for an encoder, a
pretrainer or a task model, in Google's layout or brightmart/albert_zh's.

    names = tf1_variable_map(classifier)
    names["bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"]
    names["output_weights"]                            # the classifier's head, [labels, H]

The one place these names live: loading and writing TF1 checkpoints (checkpoints.py), the
foreign readers' arrays (sources.py), --freeze (training/freezing.py) and the layer-wise
learning rates (training/optimization.py) all read them here. A map of the model, not of any
file, so it stands apart from the checkpoint files that use it.
"""

from albert_tf.modeling.encoder import AlbertEncoder


def find_encoder(model):
  """The AlbertEncoder inside `model` (itself, or `model.encoder`)."""
  if isinstance(model, AlbertEncoder):
    return model
  encoder = getattr(model, "encoder", None)
  if isinstance(encoder, AlbertEncoder):
    return encoder
  raise TypeError(f"{type(model).__name__} is neither an AlbertEncoder nor a model with an "
                  "`encoder` attribute holding one")


def _dense(names, prefix, layer):
  names[prefix + "/kernel"] = layer.kernel
  names[prefix + "/bias"] = layer.bias


def _layer_norm(names, prefix, layer):
  names[prefix + "/gamma"] = layer.gamma
  names[prefix + "/beta"] = layer.beta


# A block's names inside its scope, per layout and sub-layer: (attribute path, TF1 name).
# Google's: `attention_1/...`, `ffn_1/...`, `LayerNorm(_1)`; brightmart's: BERT's.
_BLOCK_NAMES = {
    "google": {
        "attention": (("attention.query", "attention_1/self/query"),
                      ("attention.key", "attention_1/self/key"),
                      ("attention.value", "attention_1/self/value"),
                      ("output_dense", "attention_1/output/dense"),
                      ("layer_norm", "LayerNorm")),
        "ffn": (("intermediate", "ffn_1/intermediate/dense"),
                ("output_dense", "ffn_1/intermediate/output/dense"),
                ("layer_norm", "LayerNorm_1"))},
    "brightmart": {
        "attention": (("attention.query", "attention/self/query"),
                      ("attention.key", "attention/self/key"),
                      ("attention.value", "attention/self/value"),
                      ("output_dense", "attention/output/dense"),
                      ("layer_norm", "attention/output/LayerNorm")),
        "ffn": (("intermediate", "intermediate/dense"),
                ("output_dense", "output/dense"),
                ("layer_norm", "output/LayerNorm"))},
}


def layout_of(encoder):
  """"brightmart" or "google": the layout of an encoder (duck-typed, see below)."""
  has_second_factor = getattr(encoder.embedding_layer, "word_embeddings_2", None) is not None
  return "brightmart" if has_second_factor else "google"


def _sublayer_names(names, scope, sublayer, table):
  for path, name in table:
    layer = sublayer
    for attribute in path.split("."):
      layer = getattr(layer, attribute)
    (_layer_norm if path == "layer_norm" else _dense)(names, f"{scope}/{name}", layer)


def encoder_tf1_names(encoder):
  """The encoder's variables by original name; duck-typed, so it also walks an exported
  encoder restored with `tf.saved_model.load`.

  brightmart's layout: the E -> H projection is `bert/embeddings/word_embeddings_2` and its one
  shared block lives under `bert/encoder/layer_shared` (their modeling.py)."""
  names = {}
  emb = encoder.embedding_layer
  names["bert/embeddings/word_embeddings"] = emb.word_embeddings
  names["bert/embeddings/token_type_embeddings"] = emb.token_type_embeddings
  names["bert/embeddings/position_embeddings"] = emb.position_embeddings
  _layer_norm(names, "bert/embeddings/LayerNorm", emb.layer_norm)
  layout = layout_of(encoder)
  if layout == "brightmart":
    names["bert/embeddings/word_embeddings_2"] = emb.word_embeddings_2
  projection = getattr(encoder, "embedding_projection", None)
  if projection is not None:
    _dense(names, "bert/encoder/embedding_hidden_mapping_in", projection)
  for part in ("attention", "ffn"):
    for key, sub in sorted(getattr(encoder, f"{part}_sublayers").items()):
      scope = ("bert/encoder/layer_shared" if layout == "brightmart"
               else f"bert/encoder/transformer/{key}")
      _sublayer_names(names, scope, sub, _BLOCK_NAMES[layout][part])
  _dense(names, "bert/pooler/dense", encoder.pooler_layer)
  return names


def masked_lm_tf1_names(masked_lm):
  names = {}
  _dense(names, "cls/predictions/transform/dense", masked_lm.dense)
  _layer_norm(names, "cls/predictions/transform/LayerNorm", masked_lm.layer_norm)
  names["cls/predictions/output_bias"] = masked_lm.output_bias
  return names


def tf1_variable_map(model):
  """`{original TF1 name: tf.Variable}` for an encoder, a pretrainer, or a task model.

  Task models add their heads' names with a `tf1_head_variables()` method returning a dict.
  """
  names = encoder_tf1_names(find_encoder(model))
  masked_lm = getattr(model, "masked_lm", None)
  if masked_lm is not None:
    names.update(masked_lm_tf1_names(masked_lm))
  sentence_order = getattr(model, "sentence_order", None)
  if sentence_order is not None:
    names["cls/seq_relationship/output_weights"] = sentence_order.output_weights
    names["cls/seq_relationship/output_bias"] = sentence_order.output_bias
  if hasattr(model, "tf1_head_variables"):
    names.update(model.tf1_head_variables())
  return names
