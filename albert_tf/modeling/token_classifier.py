"""AlbertTokenClassifier: the encoder plus a per-word tagging head (NER), softmax or CRF.

A word's tag is read at its first piece (the usual sub-word convention; later pieces are not
scored): the model takes `word_positions` int32 [batch, words] (the piece index of each word's
first piece in the window, 0 where there is no word) besides the encoder's three inputs and
returns float32 emissions [batch, words, num_labels]. With `use_crf`, a linear-chain CRF
(modeling/crf.py) over those emissions gives the training likelihood and Viterbi decoding,
restricted to valid BIO transitions (no I-X after O or after another type).
"""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling.classifier import ClassificationHead
from albert_tf.modeling.crf import CRF, allowed_transitions
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder, encoder_inputs

WORD_POSITIONS = "word_positions"


class TokenClassificationHead(ClassificationHead):
  """The sentence head's weights (`output_weights` [num_labels, hidden], `output_bias`, also
  Hugging Face's `classifier.weight` / `.bias`) applied at every position: dropout, then float32
  logits [batch, words, num_labels]."""

  def call(self, sequence_output, training=None):
    x = tf.cast(self.dropout(sequence_output, training=training), tf.float32)
    return tf.einsum("bsh,lh->bsl", x, self.output_weights) + self.output_bias


class AlbertTokenClassifier(tf_keras.Model):
  """Encoder + token head (+ CRF). Inputs: the encoder's dict plus `word_positions`; output:
  emissions float32 `[batch, words, num_labels]`.

  Args:
    config: AlbertConfig (or its dict).
    labels: the tag names, BIO ("O", "B-PER", "I-PER", ...); their count is the head's width.
    use_crf: add a CRF whose transitions allow only valid BIO sequences.
    dropout_rate: on the sequence output, before the head.
  """

  def __init__(self, config, labels, use_crf=False, dropout_rate=0.1, encoder=None, **kwargs):
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    labels = list(labels)
    encoder = encoder or AlbertEncoder(config, name="encoder")
    head = TokenClassificationHead(len(labels), config.hidden_size, dropout_rate,
                                   config.initializer_range, name="token_classifier")
    inputs = encoder_inputs()
    inputs[WORD_POSITIONS] = tf_keras.Input(shape=(None,), dtype=tf.int32, name=WORD_POSITIONS)
    sequence = encoder({k: inputs[k] for k in INPUT_NAMES})["sequence_output"]
    words = tf_keras.layers.Lambda(
        lambda args: tf.gather(args[0], args[1], batch_dims=1), name="first_pieces")(
            [sequence, inputs[WORD_POSITIONS]])
    emissions = head(words)
    super().__init__(inputs=inputs, outputs=emissions, **kwargs)
    # `token_head`, not `head`: checkpoints name their parts by these attributes
    # (checkpoints.HEAD_ROLES), and `head` is the sentence classifier's.
    self.config, self.encoder, self.token_head = config, encoder, head
    self.labels, self.use_crf = labels, use_crf
    self.crf = None
    if use_crf:
      allowed, allowed_start = allowed_transitions(labels)
      self.crf = CRF(len(labels), allowed=allowed, allowed_start=allowed_start, name="crf")
      self.crf.build(None)

  def word_loss(self, emissions, label_ids, label_mask):
    """float32 [batch] losses: the CRF's negative log likelihood of the window's tags, or the
    sum of the words' cross entropies. `label_mask` [batch, words] is 1 on scored words."""
    mask = tf.cast(label_mask, tf.float32)
    if self.crf is not None:
      return -self.crf.log_likelihood(emissions, label_ids, label_mask > 0)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.maximum(label_ids, 0), logits=emissions)
    return tf.reduce_sum(cross_entropy * mask, axis=1)

  def predict_tags(self, emissions, word_mask):
    """int32 [batch, words] tag ids: Viterbi with the CRF (never an invalid BIO transition),
    else each word's argmax."""
    if self.crf is not None:
      tags, _ = self.crf.decode(emissions, word_mask > 0)
      return tags
    return tf.argmax(emissions, -1, output_type=tf.int32)

  def tf1_head_variables(self):
    """Names of the head in checkpoints: `token_classifier/output_weights` and `/output_bias`
    (and `token_classifier/crf/transitions`, `start_scores`, `end_scores`)."""
    names = {"token_classifier/output_weights": self.token_head.output_weights,
             "token_classifier/output_bias": self.token_head.output_bias}
    if self.crf is not None:
      names["token_classifier/crf/transitions"] = self.crf.transitions
      if self.crf.use_boundary_scores:
        names["token_classifier/crf/start_scores"] = self.crf.start_scores
        names["token_classifier/crf/end_scores"] = self.crf.end_scores
    return names
