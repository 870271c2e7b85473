"""Fine-tuning train steps: run_classifier's, run_ner's and run_squad's training loop against
Model Garden's task models on its AlbertEncoder, for `benchmarks.run --suite finetune`.

Ours is the product's own step: the script's task (`ClassificationTask`, `NerTask`,
`SquadTask`) on its `Run`, built from its options as the script builds it (AdamW, weight decay
0.01, global-norm clipping at 1, the config's dropout and the head's), and each timed call is
one `TrainingLoop.train(1)`: the loop's compiled steps (stop check, the step, the finite-loss check)
plus its host work (metrics, learning rate, examples/s), fed from an in-memory dataset of one
batch so that no file reading is timed. The peer is `BertClassifier`, `BertTokenClassifier`
or `BertSpanLabeler` of `official.nlp.modeling.models` on `networks.AlbertEncoder` with Model
Garden's fine-tuning optimizer (`AdamWeightDecay`, weight decay 0.01 off LayerNorm and
biases, its own global-norm clip at 1), one `tf.function` step per call like its trainer's.
Both sides are built from the same config with dropout 0.1 (ALBERT v2's configs have 0: "dropout
on" is what fine-tuning users run with v1 and most ports) under the same Keras policy.
"""

import json
import os

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import AlbertConfig
from albert_tf.training.run import Run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM = os.path.join(REPO, os.pardir, "shared", "data", "sentencepiece", "spiece.model")
TASKS = ("classifier", "tagger", "squad")
NUM_CLASSES = {"classifier": 2, "tagger": 9}  # SST-2; CoNLL-2003's BIO tags
CONLL_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
DROPOUT = 0.1
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def with_dropout(config_file, directory):
  """The config with dropout 0.1 in the blocks and attention, written to `directory`:
  (its path, the AlbertConfig)."""
  with open(config_file, encoding="utf-8") as f:
    raw = json.load(f)
  raw.update(hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT)
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, "albert_config.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(raw, f, indent=2)
  return path, AlbertConfig.from_json_file(path)


def make_batch(task, config, batch, seq, seed=0):
  """A random batch in the features each job trains on (full-length sequences, two segments;
  the tagger's words are single pieces, SQuAD's answers inside the second segment)."""
  rng = np.random.default_rng(seed)
  ids = lambda high, shape: tf.constant(rng.integers(0, high, shape), tf.int32)
  half = seq // 2
  out = {"input_word_ids": tf.constant(rng.integers(5, config.vocab_size, (batch, seq)), tf.int32),
         "input_mask": tf.ones([batch, seq], tf.int32),
         "input_type_ids": tf.constant(np.repeat([[0] * half + [1] * (seq - half)], batch, 0),
                                       tf.int32)}
  if task == "classifier":
    out["label_ids"] = ids(NUM_CLASSES[task], (batch,))
  elif task == "tagger":
    out.update(word_positions=tf.constant(np.tile(np.arange(seq), (batch, 1)), tf.int32),
               label_ids=ids(NUM_CLASSES[task], (batch, seq)),
               label_mask=tf.ones([batch, seq], tf.int32))
  elif task == "squad":
    start = rng.integers(half, seq - 4, (batch,))
    out.update(start_positions=tf.constant(start, tf.int32),
               end_positions=tf.constant(start + rng.integers(0, 4, (batch,)), tf.int32))
  else:
    raise ValueError(f"task {task!r}: one of {', '.join(TASKS)}")
  return out


def ours_step(task, config_file, batch, seq, precision, output_dir, jit_compile=False):
  """The task's training loop on an in-memory batch: (step() -> loss, parameter count)."""
  # pylint: disable=import-outside-toplevel
  common = dict(albert_config_file=config_file, spm_model_file=SPM, output_dir=output_dir,
                max_seq_length=seq, train_batch_size=batch, learning_rate=2e-5,
                mixed_precision=precision, jit_compile=jit_compile, seed=1,
                log_every_seconds=1e9)
  # A long schedule, so the learning rate stays above 0 (SQuAD's comes from its training file's
  # size: without one it is a single step, and AdamW then updates by 0 at the same cost).
  if task == "classifier":
    from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
    tuning_task = ClassificationTask(ClassifierOptions(task_name="sst-2", train_step=10**6,
                                                       **common))
  elif task == "tagger":
    from albert_tf.tasks.ner import NerOptions, NerTask
    tuning_task = NerTask(NerOptions(labels=CONLL_TAGS, train_step=10**6, **common))
  else:
    from albert_tf.tasks.squad import SquadOptions, SquadTask
    tuning_task = SquadTask(SquadOptions(**common))
  loop = Run(tuning_task).loop
  loop.restore_or_initialize()
  features = make_batch(task, AlbertConfig.from_json_file(config_file), batch, seq)
  loop.attach(tf.data.Dataset.from_tensors(features).repeat())

  def step():
    return loop.train(1)["loss"]
  params = sum(int(np.prod(v.shape)) for v in loop.model.trainable_variables)
  return step, params


def peer_step(task, config, batch, seq, jit_compile=False):
  """Model Garden's task model and optimizer: (step() -> loss, parameter count); builds under
  the global Keras policy."""
  # pylint: disable=import-outside-toplevel
  from official.modeling.optimization import legacy_adamw
  from official.nlp.modeling import models
  from benchmarks.train_step_bench import peer_encoder
  encoder = peer_encoder(config)
  if task == "classifier":
    model = models.BertClassifier(encoder, num_classes=NUM_CLASSES[task], dropout_rate=DROPOUT)
  elif task == "tagger":
    model = models.BertTokenClassifier(encoder, num_classes=NUM_CLASSES[task],
                                       dropout_rate=DROPOUT)
  else:
    model = models.BertSpanLabeler(encoder)
  optimizer = legacy_adamw.AdamWeightDecay(
      2e-5, weight_decay_rate=0.01, exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
      gradient_clip_norm=1.0)
  features = make_batch(task, config, batch, seq)
  inputs = {k: features[k] for k in INPUT_NAMES}
  model(inputs)
  variables = model.trainable_variables

  def loss_of(outputs):
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits
    if isinstance(outputs, dict) and "logits" in outputs:  # BertTokenClassifier's dict
      outputs = outputs["logits"]
    if task == "classifier":
      return tf.reduce_mean(ce(features["label_ids"], tf.cast(outputs, tf.float32)))
    if task == "tagger":
      mask = tf.cast(features["label_mask"], tf.float32)
      return tf.reduce_sum(ce(features["label_ids"], tf.cast(outputs, tf.float32)) * mask) / \
          tf.reduce_sum(mask)
    if isinstance(outputs, dict):
      outputs = outputs["start_logits"], outputs["end_logits"]
    start, end = outputs  # BertSpanLabeler's [start_logits, end_logits]
    return (tf.reduce_mean(ce(features["start_positions"], tf.cast(start, tf.float32)))
            + tf.reduce_mean(ce(features["end_positions"], tf.cast(end, tf.float32)))) / 2.0

  @tf.function(jit_compile=jit_compile)
  def train(inputs):
    with tf.GradientTape() as tape:
      loss = loss_of(model(inputs, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  def step():
    return train(inputs)
  return step, int(sum(np.prod(v.shape) for v in variables))


def set_precision(precision):
  tf_keras.mixed_precision.set_global_policy(
      {"float32": "float32", "bfloat16": "mixed_bfloat16"}[precision])
