"""interop/tf1_names.py, the one map from our variables to the original's TF1 names: every
variable of a model under exactly one name, the names and shapes those the original's code
writes (reference_albert's list for Google's layout, the checkpoint brightmart's own code wrote
for theirs). That the value behind each name is the right one is what loading their checkpoints
and matching their outputs shows (test_model_fidelity, test_brightmart_zh).
"""

import json
import types

import pytest
import tensorflow as tf

import reference_albert as ref
from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.interop.tf1_names import (encoder_tf1_names, find_encoder, layout_of,
                                         tf1_variable_map)
from albert_tf.modeling.classifier import AlbertClassifier
from conftest import BRIGHTMART_FIXTURES, brightmart_checkpoint_arrays

# E < H, and 4 layers in 2 groups of 2 inner blocks: every scope of Google's layout at least twice.
GOOGLE = dict(vocab_size=61, embedding_size=12, hidden_size=16, intermediate_size=40,
              num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
              num_attention_heads=4, max_position_embeddings=20, type_vocab_size=2,
              hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              initializer_range=0.02)


def shapes(names):
  return {name: tuple(variable.shape) for name, variable in names.items()}


def assert_each_variable_named_once(model, names):
  named = [variable.ref() for variable in names.values()]
  assert len(set(named)) == len(named), "two names for one variable"
  assert set(named) == {variable.ref() for variable in model.weights}


@pytest.mark.parametrize("changes", [{}, dict(embedding_size=16)], ids=["E<H", "E=H"])
def test_google_layout_names_every_variable_as_the_original_does(changes):
  cfg = dict(GOOGLE, **changes)
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  names = tf1_variable_map(model)
  assert shapes(names) == ref.tf1_variable_shapes(cfg, heads=True)
  assert_each_variable_named_once(model, names)
  assert layout_of(model.encoder) == "google"
  # The encoder alone: the same names without the pretraining heads'.
  alone = tf1_variable_map(model.encoder)
  assert shapes(alone) == ref.tf1_variable_shapes(cfg, heads=False)


def test_brightmart_layout_names_every_variable_as_their_checkpoint_does():
  config = json.loads((BRIGHTMART_FIXTURES / "postln" / "albert_config.json").read_text())
  model = AlbertPretrainer(AlbertConfig.from_dict(dict(config, layout="brightmart")))
  names = tf1_variable_map(model)
  written = {name: value.shape for name, value in brightmart_checkpoint_arrays().items()
             if name != "global_step" and not name.endswith(("/adam_m", "/adam_v"))}
  assert shapes(names) == written
  assert_each_variable_named_once(model, names)
  assert layout_of(model.encoder) == "brightmart"


def test_task_heads_add_their_names_and_find_encoder_refuses_what_has_none():
  config = AlbertConfig.from_dict(GOOGLE)
  classifier = AlbertClassifier(config, num_labels=3)
  names = tf1_variable_map(classifier)
  assert shapes(names) == dict(ref.tf1_variable_shapes(GOOGLE), output_weights=(3, 16),
                               output_bias=(3,))
  assert_each_variable_named_once(classifier, names)
  assert find_encoder(classifier) is classifier.encoder
  encoder = AlbertEncoder(config)
  assert find_encoder(encoder) is encoder
  with pytest.raises(TypeError, match="^Module is neither an AlbertEncoder nor a model with an "
                                      "`encoder` attribute holding one$"):
    find_encoder(tf.Module())
  holder = tf.Module()
  holder.encoder = "not an encoder"
  with pytest.raises(TypeError, match="^Module is neither"):
    find_encoder(holder)


def test_an_encoder_restored_without_its_none_attributes_is_named_as_the_encoder():
  """A SavedModel restored with tf.saved_model.load keeps only the attributes that hold tracked
  objects: a Google-layout encoder with E = H comes back with neither `word_embeddings_2` nor
  `embedding_projection` (ours hold None), and is named as the encoder it was saved from."""
  encoder = AlbertEncoder(AlbertConfig.from_dict(dict(GOOGLE, embedding_size=16)))
  assert encoder.embedding_projection is None
  assert encoder.embedding_layer.word_embeddings_2 is None
  embeddings = encoder.embedding_layer
  restored = types.SimpleNamespace(
      embedding_layer=types.SimpleNamespace(**{
          name: getattr(embeddings, name) for name in (
              "word_embeddings", "token_type_embeddings", "position_embeddings", "layer_norm")}),
      attention_sublayers=encoder.attention_sublayers, ffn_sublayers=encoder.ffn_sublayers,
      pooler_layer=encoder.pooler_layer)
  assert layout_of(restored) == "google"
  want = encoder_tf1_names(encoder)
  got = encoder_tf1_names(restored)
  assert list(got) == list(want) and all(got[n] is want[n] for n in want)
  restored.embedding_layer.word_embeddings_2 = tf.Variable(tf.zeros([2, 3]))
  assert layout_of(restored) == "brightmart"
