"""Pretraining train-step speed: albert-tf against Model Garden's AlbertEncoder, same run.

    .venv/bin/python benchmarks/train_step_bench.py [--config configs/albert_base_v2.json]
        [--batch_size 8] [--seq_length 128] [--predictions 20] [--steps 6] [--repeats 3]
        [--sides model-garden,albert-tf[,albert-tf-recompute][,albert-tf-bf16][,model-garden-bf16]]

Both sides run one optimizer step per `tf.function` call on the same random batch: the
encoder, a masked-LM head tied to the word embeddings at `predictions` positions, a
sentence-order head, LAMB (weight decay 0.01), float32 (a `-bf16` side is built under
`mixed_bfloat16`, as `run_pretraining.py --mixed_precision=bfloat16` builds it). The peer is
`official.nlp.modeling.networks.AlbertEncoder` + `layers.MaskedLM` + a Dense SOP head +
`official.modeling.optimization.lamb.LAMB`. A/B runs alternate (order reversed every other
repeat); the median step time of each side is reported with its speed against the first side
(`--sides albert-tf,albert-tf-recompute` prices `--recompute_grad`). FLOPs per step use
albert_tf.modeling.summary.flops_per_token (training = 3 x forward matmul FLOPs) times batch x seq.
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from albert_tf import AlbertConfig, AlbertPretrainer  # noqa: E402
from albert_tf.modeling.summary import flops_per_token  # noqa: E402
from albert_tf.modeling.transformer import set_recompute_grad  # noqa: E402
from albert_tf.training.optimization import create_optimizer  # noqa: E402


def make_batch(config, batch, seq, predictions, seed=0):
  rng = np.random.default_rng(seed)
  return {
      "input_word_ids": tf.constant(rng.integers(5, config.vocab_size, (batch, seq)), tf.int32),
      "input_mask": tf.ones([batch, seq], tf.int32),
      "input_type_ids": tf.constant(np.repeat([[0] * (seq // 2) + [1] * (seq - seq // 2)],
                                              batch, 0), tf.int32),
      "masked_lm_positions": tf.constant(rng.integers(1, seq, (batch, predictions)), tf.int32),
      "masked_lm_ids": tf.constant(rng.integers(5, config.vocab_size, (batch, predictions)),
                                   tf.int32),
      "next_sentence_labels": tf.constant(rng.integers(0, 2, (batch,)), tf.int32),
  }


def losses(mlm_logits, sop_logits, batch):
  mlm = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      batch["masked_lm_ids"], tf.cast(mlm_logits, tf.float32)))
  sop = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      batch["next_sentence_labels"], tf.cast(sop_logits, tf.float32)))
  return mlm + sop


def ours_step(config, jit_compile=False, recompute_grad=False):
  """albert-tf's step function and parameter count; builds under the global Keras policy.
  `recompute_grad`: blocks recomputed in the backward pass (run_pretraining --recompute_grad)."""
  model = AlbertPretrainer(config)
  set_recompute_grad(model, recompute_grad)
  optimizer = create_optimizer("lamb", 1e-4)

  @tf.function(jit_compile=jit_compile)
  def step(batch):
    with tf.GradientTape() as tape:
      out = model({k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                         "masked_lm_positions")}, training=True)
      loss = losses(out["mlm_logits"], out["sop_logits"], batch)
    variables = model.trainable_variables
    grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
    optimizer.apply_gradients(zip(grads, variables))
    return loss
  return step, model.count_params()


def peer_encoder(config):
  """Model Garden's `networks.AlbertEncoder` with the config's shape (dict outputs)."""
  from official.nlp.modeling import networks  # pylint: disable=g-import-not-at-top
  return networks.AlbertEncoder(
      vocab_size=config.vocab_size, embedding_width=config.embedding_size,
      hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, intermediate_size=config.intermediate_size,
      dropout_rate=config.hidden_dropout_prob,
      attention_dropout_rate=config.attention_probs_dropout_prob, dict_outputs=True)


def peer_step(config, jit_compile=False):
  """Model Garden's step function and parameter count; builds under the global Keras policy."""
  from official.modeling.optimization import lamb  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import layers  # pylint: disable=g-import-not-at-top
  encoder = peer_encoder(config)
  mlm = layers.MaskedLM(embedding_table=encoder.get_embedding_table(), activation="gelu")
  sop = tf_keras.layers.Dense(2)
  optimizer = lamb.LAMB(1e-4, weight_decay_rate=0.01,
                        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
  dummy = make_batch(config, 1, 8, 2)
  outputs = encoder({k: dummy[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
  mlm(outputs["sequence_output"], masked_positions=dummy["masked_lm_positions"])
  sop(outputs["pooled_output"])
  variables = encoder.trainable_variables + mlm.trainable_variables + sop.trainable_variables
  unique = list({id(v): v for v in variables}.values())

  @tf.function(jit_compile=jit_compile)
  def step(batch):
    with tf.GradientTape() as tape:
      out = encoder({k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids")},
                    training=True)
      mlm_logits = mlm(out["sequence_output"], masked_positions=batch["masked_lm_positions"])
      loss = losses(mlm_logits, sop(out["pooled_output"]), batch)
    grads, _ = tf.clip_by_global_norm(tape.gradient(loss, unique), 1.0)
    optimizer.apply_gradients(zip(grads, unique))
    return loss
  return step, int(sum(np.prod(v.shape) for v in unique))


def under_policy(policy, make, *args):
  """`make(*args)` with the global Keras policy set to `policy` while it builds (the layers keep
  the policy they were built under)."""
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    return make(*args)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


def time_steps(step, batch, steps):
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    float(step(batch))
    times.append(time.perf_counter() - start)
  return times


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..",
                                                       "configs", "albert_base_v2.json"))
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--seq_length", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--steps", type=int, default=6)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--sides", default="model-garden,albert-tf",
                      help="comma-separated, timed in alternation; speeds are quoted against "
                           "the first: model-garden, albert-tf, albert-tf-recompute (ours with "
                           "--recompute_grad), albert-tf-bf16, model-garden-bf16 "
                           "(mixed_bfloat16)")
  args = parser.parse_args(argv)
  config = AlbertConfig.from_json_file(args.config)
  batch = make_batch(config, args.batch_size, args.seq_length, args.predictions)
  makers = {"albert-tf": lambda: ours_step(config),
            "albert-tf-recompute": lambda: ours_step(config, recompute_grad=True),
            "albert-tf-bf16": lambda: under_policy("mixed_bfloat16", ours_step, config),
            "model-garden": lambda: peer_step(config),
            "model-garden-bf16": lambda: under_policy("mixed_bfloat16", peer_step, config)}
  names = args.sides.split(",")
  unknown = [name for name in names if name not in makers]
  if unknown:
    parser.error(f"--sides: unknown {unknown}; choose from {sorted(makers)}")
  sides = {name: makers[name]() for name in names}
  for name, (step, params) in sides.items():
    float(step(batch))  # trace and warm up
    print(f"{name}: {params:,} trainable parameters, traced")
  times = {name: [] for name in sides}
  for repeat in range(args.repeats):
    order = list(sides.items())
    for name, (step, _) in order if repeat % 2 == 0 else order[::-1]:  # interleaved A/B
      times[name] += time_steps(step, batch, args.steps)
  _, training = flops_per_token(config, args.seq_length, args.predictions)
  flops = training * args.batch_size * args.seq_length  # without recomputation's extra pass
  yardstick = statistics.median(times[names[0]])
  print(f"\nbatch {args.batch_size} x seq {args.seq_length}, {args.predictions} predictions, "
        f"{len(times[names[0]])} steps per side; {flops / 1e9:.1f} GFLOP per step")
  print(f"{'side':<20}{'median s/step':>14}{'seq/s':>9}{'GFLOP/s':>10}"
        f"{'speed vs ' + names[0]:>24}")
  for name, values in times.items():
    median = statistics.median(values)
    print(f"{name:<20}{median:>14.3f}{args.batch_size / median:>9.2f}"
          f"{flops / median / 1e9:>10.1f}{yardstick / median:>23.2f}x")


if __name__ == "__main__":
  main()
