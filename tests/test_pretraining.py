"""run_pretraining: losses, eval results, checkpoints that resume, strategies, accumulation."""

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.cli.runs import run_pretraining
from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data
from albert_tf.interop.checkpoints import CheckpointError, native_checkpoint
from albert_tf.interop.tf1_names import tf1_variable_map
from albert_tf.modeling.attention import attention_bias
from albert_tf.modeling.transformer import recomputed_rounds, set_recompute_grad
from albert_tf.tasks.pretraining import PretrainingOptions, PretrainingTask, pretraining_losses
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA, float32_atol, reserved_ports

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
BOOK = SHARED_DATA / "corpus_en" / "nltk_gutenberg" / "austen-persuasion.txt"
SUPPORT = ROOT / "tests" / "support_pretrain.py"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """Real pretraining data (seq 32, 5 predictions) and two tiny configs (with/without dropout)."""
  folder = tmp_path_factory.mktemp("pretraining")
  shards = [str(folder / f"train-{i}.tfrecord") for i in range(2)]
  create_pretraining_data([str(BOOK)], shards, CreationOptions(
      spm_model_file=str(SPM), max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1,
      num_workers=1))
  tiny = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  tiny.to_json_file(folder / "tiny.json")
  tiny.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).to_json_file(
      folder / "tiny_nodropout.json")
  return folder


def opts(data, out, **changes):
  base = dict(albert_config_file=str(data / "tiny.json"),
              input_file=str(data / "train-*.tfrecord"), output_dir=str(out),
              max_seq_length=32, max_predictions_per_seq=5, do_train=True, do_eval=False,
              train_batch_size=16, eval_batch_size=16, num_train_steps=20, num_warmup_steps=5,
              learning_rate=0.005, save_checkpoints_steps=10, iterations_per_loop=5,
              max_eval_steps=4, seed=3, log_every_seconds=0)
  base.update(changes)
  return PretrainingOptions(**base)


def test_real_data_training_lowers_the_loss_and_writes_eval_results(data, tmp_path):
  history = []
  train, evaluation = run_pretraining(
      opts(data, tmp_path, do_eval=True, num_train_steps=40, learning_rate=0.01), history=history)
  assert [h["step"] for h in history] == [5, 10, 15, 20, 25, 30, 35, 40]
  assert history[-1]["loss"] < history[0]["loss"] - 0.5
  lines = (tmp_path / "eval_results.txt").read_text().splitlines()
  assert [line.split(" = ")[0] for line in lines] == [
      "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "sentence_order_accuracy",
      "sentence_order_loss"]
  assert "global_step = 40" in lines
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-40")
  assert tf.io.gfile.glob(str(tmp_path / "train" / "events.out.tfevents.*"))
  assert tf.io.gfile.glob(str(tmp_path / "eval" / "events.out.tfevents.*"))


def test_eval_loss_is_masked_lm_loss_plus_weighted_sentence_order_loss(data, tmp_path):
  # The reported loss is the mean over batches of each batch's loss, sum(w * ce) / (W + 1e-5)
  # + weight * mean(sop_ce), while masked_lm_loss weights every prediction alike across
  # batches (sum(w * ce) / sum(W)): over several batches with different prediction counts W
  # the two differ by more than rounding. Over one batch they agree but for the 1e-5 (at most
  # masked_lm_loss * 1e-5 / W, W >= one prediction per example) and float32 rounding of the
  # longest sum, the batch's predictions. A weight other than 1 shows the SOP term's weighting.
  run_pretraining(opts(data, tmp_path, num_train_steps=10))
  weight = 0.5
  _, evaluation = run_pretraining(opts(data, tmp_path, num_train_steps=10, do_train=False,
                                       do_eval=True, max_eval_steps=1,
                                       sentence_loss_weight=weight))
  mlm, sop = evaluation["masked_lm_loss"], evaluation["sentence_order_loss"]
  batch, predictions = 16, 5
  atol = (float32_atol([evaluation["loss"], mlm, sop], batch * predictions)
          + mlm * 1e-5 / batch)
  assert abs(evaluation["loss"] - (mlm + weight * sop)) <= atol


def test_resumed_run_ends_with_the_weights_of_an_uninterrupted_run(data, tmp_path):
  init = _initial_checkpoint(data, tmp_path)
  common = dict(albert_config_file=str(data / "tiny_nodropout.json"), init_checkpoint=init,
                save_checkpoints_steps=5)
  run_pretraining(opts(data, tmp_path / "straight", num_train_steps=10, **common))
  run_pretraining(opts(data, tmp_path / "resumed", num_train_steps=5, **common))
  history = []
  run_pretraining(opts(data, tmp_path / "resumed", num_train_steps=10, **common),
                  history=history)
  assert [h["step"] for h in history] == [10]  # continued from step 5, not restarted
  weights = []
  for name in ("straight", "resumed"):
    trainer = Run(PretrainingTask(opts(data, tmp_path / name, num_train_steps=10, **common)))
    assert trainer.loop.restore_or_initialize().endswith("ckpt-10")
    assert trainer.loop.global_step == 10
    weights.append({n: v.numpy() for n, v in tf1_variable_map(trainer.loop.model).items()})
  for name in weights[0]:
    np.testing.assert_array_equal(weights[0][name], weights[1][name], err_msg=name)


def test_real_data_sigkill_then_restart_reaches_the_final_step(data, tmp_path):
  command = [sys.executable, str(ROOT / "run_pretraining.py"),
             f"--albert_config_file={data / 'tiny.json'}",
             f"--input_file={data / 'train-*.tfrecord'}", f"--output_dir={tmp_path}",
             "--do_train", "--train_batch_size=8", "--max_seq_length=32",
             "--max_predictions_per_seq=5", "--num_train_steps=400", "--num_warmup_steps=10",
             "--save_checkpoints_steps=10", "--iterations_per_loop=10", "--keep_checkpoint_max=2"]
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.time() + 120
    # The checkpoint state file, not the .index (written first): a kill between the two left
    # no checkpoint to resume.
    while tf.train.latest_checkpoint(str(tmp_path)) is None and time.time() < deadline:
      time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
  finally:
    process.wait(timeout=30)
  assert list(tmp_path.glob("ckpt-*.index")), "no checkpoint within 120 s"
  assert tf.train.latest_checkpoint(str(tmp_path)) is not None
  short = [c.replace("--num_train_steps=400", "--num_train_steps=30") for c in command]
  done = subprocess.run(short, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "Resumed from" in done.stderr
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-30")
  assert not list(tmp_path.glob("*_temp"))  # a save the kill interrupted is cleaned up


def _initial_checkpoint(data, folder):
  model = AlbertPretrainer(AlbertConfig.from_json_file(data / "tiny_nodropout.json"))
  return native_checkpoint(model).write(str(folder / "init" / "ckpt-0"))


def _support(args, env=None, timeout=300):
  return subprocess.Popen([sys.executable, str(SUPPORT)] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _weights(folder):
  with np.load(folder / "final_weights.npz") as f:
    return {k: f[k] for k in f.files}


def _assert_same_weights(a, b, rtol=1e-4):
  assert set(a) == set(b)
  for name in a:
    np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=1e-6, err_msg=name)


def test_real_data_mirrored_on_two_cpus_equals_one_device(data, tmp_path):
  init = _initial_checkpoint(data, tmp_path)
  config = data / "tiny_nodropout.json"
  # Both processes at once: their start (imports, tracing) is mostly one core's work.
  processes = {name: _support([strategy, cpus, config, data / "train-*.tfrecord", init,
                               tmp_path / name, 4, 16, 1])
               for name, strategy, cpus in (("one", "one_device", 1), ("mirrored", "mirrored", 2))}
  runs = {}
  try:
    for name, process in processes.items():
      out, err = process.communicate(timeout=300)
      assert process.returncode == 0, err[-2000:]
      runs[name] = out
  finally:
    for process in processes.values():
      if process.poll() is None:
        process.kill()
        process.communicate()  # reaped, its pipes read to their end and closed
  assert "replicas=1 step=4" in runs["one"] and "replicas=2 step=4" in runs["mirrored"]
  _assert_same_weights(_weights(tmp_path / "one"), _weights(tmp_path / "mirrored"))


def test_real_data_multi_worker_mirrored_two_processes_end_with_identical_weights(data,
                                                                                  tmp_path):
  init = _initial_checkpoint(data, tmp_path)
  processes = []
  with reserved_ports(2) as ports:  # held until the workers' servers have ended
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    try:
      for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        processes.append(_support(["multi_worker_mirrored", 1, data / "tiny_nodropout.json",
                                   data / "train-*.tfrecord", init, tmp_path / "run", 3, 16, 1],
                                  env=env))
      # Both pipes read at once: a worker blocked on a full pipe would stall the other in
      # their collectives.
      with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outputs = list(pool.map(lambda p: p.communicate(timeout=300), processes))
    finally:
      for p in processes:
        if p.poll() is None:
          p.kill()
          p.communicate()
  for p, (out, err) in zip(processes, outputs):
    assert p.returncode == 0, err[-3000:]
    assert "replicas=2 step=3" in out
  chief = _weights(tmp_path / "run")
  other = _weights(tmp_path / "run" / "workers" / "worker_1")
  for name in chief:
    np.testing.assert_array_equal(chief[name], other[name], err_msg=name)


def test_gradient_accumulation_and_block_recomputation_equal_one_plain_step(data, tmp_path):
  # Both at once against the plain step: the MLM normalizer across 4 micro-batches is
  # pretraining's own; recomputation alone is compared gradient for gradient in the tests
  # below, accumulation alone in test_training_core.
  init = _initial_checkpoint(data, tmp_path)
  weights = []
  for k, recompute in ((1, False), (4, True)):
    trainer = Run(PretrainingTask(opts(data, tmp_path / f"k{k}{recompute}", init_checkpoint=init,
                              num_train_steps=3,
                              albert_config_file=str(data / "tiny_nodropout.json"),
                              gradient_accumulation_steps=k, num_warmup_steps=0,
                              learning_rate=0.01, recompute_grad=recompute)))
    assert all(b.recompute_grad == recompute for b in trainer.loop.model.encoder.blocks)
    trainer.loop.restore_or_initialize()
    trainer.train()
    weights.append({n: v.numpy() for n, v in tf1_variable_map(trainer.loop.model).items()})
  _assert_same_weights(weights[0], weights[1])
  moved = weights[0]["bert/pooler/dense/kernel"]
  assert not np.allclose(moved, tf.train.load_checkpoint(init).get_tensor(
      "encoder/pooler/kernel/.ATTRIBUTES/VARIABLE_VALUE"))


def test_mismatched_config_data_and_flags_are_named(data, tmp_path):
  with pytest.raises(ValueError, match=r"input_ids of length 32 but --max_seq_length=64"):
    Run(PretrainingTask(opts(data, tmp_path, max_seq_length=64)))
  with pytest.raises(ValueError, match=r"length 5 but --max_predictions_per_seq=20"):
    Run(PretrainingTask(opts(data, tmp_path, max_predictions_per_seq=20)))
  small_vocab = tmp_path / "small_vocab.json"
  AlbertConfig.from_json_file(data / "tiny.json").replace(vocab_size=100).to_json_file(
      small_vocab)
  with pytest.raises(ValueError, match=r"token id \d+ but the config's vocab_size is 100"):
    Run(PretrainingTask(opts(data, tmp_path, albert_config_file=str(small_vocab))))
  with pytest.raises(FileNotFoundError, match="matches no file: .*nothing-\\*"):
    Run(PretrainingTask(opts(data, tmp_path, input_file=str(tmp_path / "nothing-*"))))
  with pytest.raises(ValueError, match="--train_batch_size=10 is not divisible by 1 replicas "
                                       "x 4 accumulation"):
    Run(PretrainingTask(opts(data, tmp_path, train_batch_size=10, gradient_accumulation_steps=4)))
  other = AlbertEncoder(AlbertConfig.from_json_file(data / "tiny.json").replace(
      intermediate_size=48))
  init = native_checkpoint(other).write(str(tmp_path / "other" / "ckpt-1"))
  trainer = Run(PretrainingTask(opts(data, tmp_path / "run", init_checkpoint=init)))
  with pytest.raises(CheckpointError, match="shape mismatch"):
    trainer.loop.restore_or_initialize()


def test_cli_reports_errors_and_needs_train_or_eval(data, tmp_path):
  base = [sys.executable, str(ROOT / "run_pretraining.py"),
          f"--albert_config_file={data / 'tiny.json'}", f"--output_dir={tmp_path}",
          "--max_seq_length=32", "--max_predictions_per_seq=5"]
  bad = subprocess.run(base + ["--input_file=/no/such-*", "--do_train"], capture_output=True,
                       text=True, timeout=120)
  assert bad.returncode == 1 and "matches no file: /no/such-*" in bad.stderr
  with pytest.raises(ValueError, match="--do_train or --do_eval"):
    run_pretraining(opts(data, tmp_path, do_train=False, do_eval=False))


def _step_losses(data, out, config, precision="float32", jit=False):
  """The per-step losses of 4 training steps (one per loop) with `config` (a file in `data`)."""
  import tf_keras
  history = []
  try:
    run_pretraining(opts(data, out, albert_config_file=str(data / config), num_train_steps=4,
                         iterations_per_loop=1, mixed_precision=precision, jit_compile=jit),
                    history=history)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert [h["step"] for h in history] == [1, 2, 3, 4]
  return np.array([h["loss"] for h in history])


@pytest.fixture(scope="module")
def float32_losses(data, tmp_path_factory):
  """`_step_losses` of float32 without XLA, by config file: run once each in the module."""
  runs = {}

  def losses(config):
    if config not in runs:
      runs[config] = _step_losses(data, tmp_path_factory.mktemp("float32"), config)
    return runs[config]
  return losses


UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "float32": 2.0 ** -24}


@pytest.mark.parametrize("precision, jit", [("bfloat16", False), ("float16", False),
                                            ("float32", True)])
def test_mixed_precision_and_xla_train(data, tmp_path, float32_losses, precision, jit):
  """Each variant's per-step losses follow a float32 run's (no XLA) on the same data, seed and
  steps, to within the rounding of the precision it computes in.

  The runs start from the same weights (the seed) and read the same batches. bfloat16 and
  float16 train with dropout: their graphs draw each mask's seed from a stateful op seeded by a
  count of the graph's random ops, in the same order as float32's, so the masks are the same.
  XLA compiles those draws with its own generator (other draws than TensorFlow's kernel, and
  other again in each compiled function), so the XLA run and its reference have no dropout:
  they then compute the same function and differ by float32 rounding alone.

  Steps 1 and 2 use the starting weights (the warm-up's first rate is 0 x 0.005 / 5); the
  weights of steps 3 and 4 took updates at rates 0.001 and 0.002. Each update is computed from
  gradients that carry the same rounding as the forward pass, and LAMB scales a kernel's update
  to lr * |w|: the rounding moves the runs' kernels apart by its share of 0.3% of their size.
  The tolerance grows all the same, as a random walk over the updates taken (the fine-tuning
  test's growth over its steps). An element whose gradient is within rounding of 0 may step
  either way (Adam's uncorrected first steps are full steps whatever the gradient's size), but
  such steps bear no relation to the next batch's gradient: their effects on its loss add as a
  random walk over the elements.
  """
  import tf_keras
  config = "tiny_nodropout.json" if jit else "tiny.json"
  losses = _step_losses(data, tmp_path, config, precision, jit)
  try:
    trainer = Run(PretrainingTask(opts(data, tmp_path, albert_config_file=str(data / config),
                                       num_train_steps=4, mixed_precision=precision)))
    compute = {"bfloat16": "bfloat16", "float16": "float16"}.get(precision, "float32")
    assert trainer.loop.model.encoder.embedding_layer.compute_dtype == compute
    assert trainer.loop.model.encoder.embedding_layer.word_embeddings.dtype == tf.float32
    if precision == "float16":
      assert isinstance(trainer.loop.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  reference = float32_losses(config)
  c = AlbertConfig.from_json_file(data / config)
  sigma, batch, predictions = c.initializer_range, 16, 16 * 5
  # The compute dtype reaches the loss through the logits' inputs. An MLM logit is the head's
  # LayerNorm output (norm sqrt(E) at the start: gamma 1, beta 0) dotted with a word-embedding
  # row (drawn with sd <= sigma), rounded in the compute dtype: sd sigma * sqrt(E). The SOP
  # margin is the pooled output (|tanh a| <= |a|, a of sd sigma * sqrt(H) from a LayerNorm
  # output) dotted with the two rows' difference (sd sigma * sqrt(2)) in float32: sd
  # sqrt(2) * H * sigma^2. A relative error eps of those inputs moves a cross-entropy by about
  # eps times the label's logit (the softmax-weighted mean of the others is ~0: p is near
  # uniform at the start), and eps is the unit roundoff grown as a random walk over the ~50
  # roundings of the longest path (~7 in the embeddings, ~19 per layer application: six
  # products and their kernels' casts, the mask's add, softmax, dropouts, residual adds, LayerNorms,
  # GELU; ~6 in the MLM head). One prediction's error, not divided by sqrt(predictions):
  # repeated tokens and the kernels' shared rounding correlate them.
  logit_size = sigma * np.sqrt(c.embedding_size) + np.sqrt(2.0) * c.hidden_size * sigma ** 2
  compute_part = UNIT_ROUNDOFF[precision] * np.sqrt(50) * logit_size
  # Both runs round the loss's float32 sums, in other orders (XLA, Eigen, oneDNN): the softmax's
  # sum of V exponentials (relative error u * sqrt(V): an absolute error of its logarithm) and
  # the batch's mean of predictions + examples terms (relative u * sqrt(terms)); twice that.
  u = UNIT_ROUNDOFF["float32"]
  float32_part = 2 * u * (np.sqrt(c.vocab_size) + reference * np.sqrt(predictions + batch))
  updates = np.maximum(np.arange(1, 5) - 2, 0)  # updates at a nonzero rate before each step
  tolerance = (compute_part + float32_part) * np.sqrt(1 + updates)
  deviation = np.abs(losses - reference)
  assert np.all(deviation <= tolerance), (losses, reference, deviation / tolerance)


def test_recomputed_block_runs_twice_and_keeps_its_dropout_masks(monkeypatch):
  """--recompute_grad: the backward pass runs each block again, with the forward pass's
  dropout masks (drawn statelessly from a seed per call), so gradients are the plain ones."""
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  assert config.hidden_dropout_prob > 0 and config.attention_probs_dropout_prob > 0
  encoder = AlbertEncoder(config)
  block = encoder.blocks[0]
  x = tf.random.stateless_normal([2, 8, config.hidden_size], [1, 2])
  bias = attention_bias(tf.constant([[1] * 8, [1] * 5 + [0] * 3]))
  seed = tf.constant([5, 6])

  def gradients(f):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = f(x)
      loss = tf.reduce_sum(y * tf.sin(y))
    return y, tape.gradient(loss, [x] + block.trainable_variables)

  y_plain, plain = gradients(lambda h: block.apply_block(h, bias, True, seed))
  y_again, again = gradients(tf.recompute_grad(lambda h: block.apply_block(h, bias, True, seed)))
  np.testing.assert_array_equal(y_plain.numpy(), y_again.numpy())
  # The same ops run again: float32 rounding of the block's forward and backward sums (I and H
  # each way) and a weight gradient's over the 2 * 8 tokens, at each gradient's scale; a key
  # bias's true gradient is 0 (the softmax ignores a shift of a row's scores), so its rounding
  # is at the scale of the query bias's, whose sums have the same terms.
  terms = 2 * (config.intermediate_size + config.hidden_size) + 2 * 8
  names = ["x"] + [v.name for v in block.trainable_variables]
  scales = {n: tf.convert_to_tensor(g).numpy() for n, g in zip(names, again)}
  for name, a, b in zip(names, plain, again):
    scale = scales[name.replace("/key/bias", "/query/bias")]
    np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy(),
                               rtol=0, atol=float32_atol(scale, terms), err_msg=name)
  # The seed's masks are dropout: training differs from inference; another seed, other masks.
  assert not np.allclose(y_plain, block.apply_block(x, bias, False))
  assert not np.allclose(y_plain, block.apply_block(x, bias, True, seed + 1))

  calls = []
  apply_block = type(block).apply_block
  monkeypatch.setattr(type(block), "apply_block",
                      lambda self, *a, **k: calls.append(1) or apply_block(self, *a, **k))
  inputs = encoder.dummy_inputs(2, 8)
  for recompute, expected in ((False, 2), (True, 4)):  # 2 applications of the shared block
    set_recompute_grad(encoder, recompute)
    calls.clear()
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.sin(encoder(inputs, training=True)["sequence_output"]))
    grads = tape.gradient(loss, block.trainable_variables)
    assert len(calls) == expected and all(g is not None for g in grads)


def test_shared_blocks_recompute_as_one_loop_with_the_plain_gradients():
  """--recompute_grad over layers that share their blocks is one loop (`recomputed_rounds`):
  the outputs of the blocks applied one by one with the same dropout seeds, their gradients
  (through the last output and through a middle layer's), and a traced step that does not
  grow with the number of layers (per-call recomputation kept all L terms of every shared
  weight's gradient alive until their sum)."""
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      num_hidden_layers=3, inner_group_num=2)
  encoder = AlbertEncoder(config)
  blocks = encoder.blocks  # inner groups 0 and 1, applied in turn, three rounds
  assert len(blocks) == 2
  variables = blocks[0].trainable_variables + blocks[1].trainable_variables
  x = tf.random.stateless_normal([2, 8, config.hidden_size], [1, 2])
  bias = attention_bias(tf.constant([[1] * 8, [1] * 5 + [0] * 3]))
  seed = tf.constant([7, 9])

  def one_by_one(h):
    outputs = []
    for step in range(6):
      h = blocks[step % 2].apply_block(h, bias, True, seed + tf.constant([step, 0]))
      outputs.append(h)
    return h, tf.stack(outputs)

  @tf.function
  def gradients(looped):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y, outputs = recomputed_rounds(blocks, 3, x, bias, seed) if looped else one_by_one(x)
      loss = tf.reduce_sum(y * tf.sin(y)) + tf.reduce_sum(tf.cos(outputs[2]))
    return y, outputs, tape.gradient(loss, [x] + variables)

  y, outputs, grads = gradients(False)
  y_loop, outputs_loop, grads_loop = gradients(True)
  # The two graphs may sum in other orders (oneDNN's kernels differ between them): float32
  # rounding of 6 applications, each adding at most 64 terms (16 rows, or the FFN's 64 units).
  terms = 6 * max(2 * 8, config.intermediate_size)
  np.testing.assert_allclose(y_loop.numpy(), y.numpy(), rtol=0,
                             atol=float32_atol(y.numpy(), terms))
  np.testing.assert_allclose(outputs_loop.numpy(), outputs.numpy(), rtol=0,
                             atol=float32_atol(outputs.numpy(), terms))
  # A bias's gradient sums the same rows as its kernel's (times LayerNorm-scaled inputs), so
  # the kernel's magnitude bounds its terms too: the key bias's exact gradient is 0 (softmax
  # ignores a shift of every score), and what both graphs compute there is rounding noise.
  names = ["x"] + [v.name for v in variables]
  layer_scale = {}
  for name, a in zip(names, grads):
    layer = name.rsplit("/", 1)[0]
    layer_scale[layer] = max(layer_scale.get(layer, 0.0), float(np.max(np.abs(a))))
  for name, a, b in zip(names, grads, grads_loop):
    assert b is not None and np.any(b.numpy()), name
    np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=0, err_msg=name,
                               atol=float32_atol(layer_scale[name.rsplit("/", 1)[0]], terms))
  assert not np.allclose(y_loop, recomputed_rounds(blocks, 3, x, bias, seed + 1)[0])

  def step_ops(layers):
    deep = AlbertEncoder(config.replace(num_hidden_layers=layers, inner_group_num=1))
    set_recompute_grad(deep, True)
    inputs = deep.dummy_inputs(2, 8)

    @tf.function
    def step():
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(deep(inputs, training=True)["sequence_output"])
      return tape.gradient(loss, deep.trainable_variables)
    graph = step.get_concrete_function().graph.as_graph_def()
    ops = Counter(node.op for node in graph.node)
    ops.update(node.op for f in graph.library.function for node in f.node_def)
    return ops

  two, five = step_ops(2), step_ops(5)
  assert two["MatMul"] > 0 and two == five


def test_sentence_loss_weight_scales_the_sentence_term_and_zero_leaves_mlm_alone():
  rng = np.random.default_rng(0)
  outputs = {"mlm_logits": tf.constant(rng.normal(size=(2, 3, 7)), tf.float32),
             "sop_logits": tf.constant(rng.normal(size=(2, 2)), tf.float32)}
  batch = {"masked_lm_ids": tf.constant([[1, 2, 0], [3, 0, 0]]),
           "masked_lm_weights": tf.constant([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
           "next_sentence_labels": tf.constant([[0], [1]])}
  mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["masked_lm_ids"],
                                                          outputs["mlm_logits"])
  mlm = float(tf.reduce_sum(mlm_ce * batch["masked_lm_weights"]) / 3.0)
  sop = float(tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      batch["next_sentence_labels"][:, 0], outputs["sop_logits"])))
  for weight in (1.0, 0.5, 0.0):
    loss, _, _ = pretraining_losses(outputs, batch, 3.0, 2, sentence_loss_weight=weight)
    # The same float32 terms: the MLM's weighted sum over 3 positions and its division, the
    # SOP's mean over 2, the weighting and the sum.
    assert float(loss) == pytest.approx(mlm + weight * sop, abs=float32_atol([mlm, sop], 3 + 3))
  with pytest.raises(ValueError, match="--sentence_loss_weight"):
    Run(PretrainingTask(PretrainingOptions(albert_config_file=str(ROOT / "configs" / "tiny.json"),
                                  input_file="unused", output_dir="unused",
                                  sentence_loss_weight=-1.0)))
