"""The training loop under fine-tuning: accumulation, precision, freezing, distillation, SIGTERM."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.cli.runs import run_classifier
from albert_tf.interop.checkpoints import load_checkpoint, native_checkpoint
from albert_tf.interop.tf1_names import tf1_variable_map
from albert_tf.modeling.classifier import AlbertClassifier, ClassificationHead
from albert_tf.modeling.dense import TokenDense
from albert_tf.modeling.heads import SentenceOrderHead
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.tasks.distillation import (DistillOptions, Distiller, hidden_state_loss, layer_map,
                                          soft_target_loss)
from albert_tf.training.freezing import freeze_parts
from albert_tf.training.precision import precision_policy
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA, float32_atol

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"


@pytest.fixture(scope="module")
def csv_task(tmp_path_factory):
  """A 32-row user CSV (review, stars) and a dropout-free tiny config."""
  folder = tmp_path_factory.mktemp("csv")
  rows = ["review,stars"] + [f"{'great fun' if i % 2 else 'dull and slow'} take {i},{i % 2}"
                             for i in range(32)]
  for split in ("train", "dev"):
    (folder / f"{split}.csv").write_text("\n".join(rows) + "\n")
  AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).to_json_file(
          folder / "tiny_nodropout.json")
  return folder


def opts(data, out, **changes):
  base = dict(task_name="csv", data_dir=str(data), output_dir=str(out),
              albert_config_file=str(data / "tiny_nodropout.json"), spm_model_file=str(SPM),
              max_seq_length=16, do_train=True, train_batch_size=16, train_step=2,
              save_checkpoints_steps=2, iterations_per_loop=2, learning_rate=1e-3, seed=3,
              log_every_seconds=0,
              csv_options=dict(text_a_column="review", label_column="stars"))
  base.update(changes)
  return ClassifierOptions(**base)


def trained_weights(options, history=None):
  run = Run(ClassificationTask(options))
  run.loop.model.head.dropout.rate = 0.0  # the original's fixed 0.1 head dropout: off to compare
  run.loop.restore_or_initialize()
  initial = {n: v.numpy() for n, v in tf1_variable_map(run.loop.model).items()}
  run.train(history)
  return initial, {n: v.numpy() for n, v in tf1_variable_map(run.loop.model).items()}


@pytest.fixture(scope="module")
def one_batch_run(csv_task, tmp_path_factory):
  """2 steps of 16 (the accumulation reference, and the distillation tests' teacher)."""
  out = tmp_path_factory.mktemp("k1")
  start, end = trained_weights(opts(csv_task, out))
  return start, end, out


def test_accumulation_equals_one_big_batch(csv_task, one_batch_run, tmp_path):
  start, whole, _ = one_batch_run
  _, accumulated = trained_weights(opts(csv_task, tmp_path / "k4",
                                        gradient_accumulation_steps=4))
  for name in whole:
    # 4 micro-batches of 4 sum to the batch of 16's gradient up to float32 rounding.
    np.testing.assert_allclose(accumulated[name], whole[name], atol=2e-6, err_msg=name)
    assert not np.array_equal(whole[name], start[name]), name  # compared after updates


def test_bfloat16_fine_tuning_follows_the_float32_loss_curve(csv_task, tmp_path):
  """From trained weights (where fine-tuning starts), a bfloat16 run's per-step losses stay
  within bfloat16 rounding of float32's.

  Not from random weights: there the batch gradient is a near-cancelling sum (balanced labels
  over [CLS] vectors that differ by less than bfloat16's 8 bits), which bfloat16 keeps with
  50-100% error in most variables, and Adam's first step (no bias correction) turns each
  element's sign into a full step, so the two runs leave the plateau at different steps.
  """
  start, history = tmp_path / "start", []
  trained_weights(opts(csv_task, start, jit_compile=True,  # XLA on the way (a shared flag)
                       train_step=30, save_checkpoints_steps=30, iterations_per_loop=10),
                  history)
  assert history[-1]["loss"] < history[0]["loss"] - 0.1  # it learned
  steps, batch, curves = 20, 16, {}
  for precision in ("float32", "bfloat16"):
    history = []
    trained_weights(opts(csv_task, tmp_path / precision, mixed_precision=precision,
                         init_checkpoint=str(start), train_step=steps,
                         save_checkpoints_steps=steps, iterations_per_loop=1), history)
    curves[precision] = np.array([h["loss"] for h in history])
  loss = curves["float32"]
  assert loss[-1] < loss[0] / 10  # still moving: a curve to follow, not a flat line
  # A per-example cross-entropy moves by about loss * max(1, -log loss) times the relative
  # error of its logit margin; that error is bfloat16's unit roundoff 2^-8 grown as a random
  # walk over the ~32 roundings between the inputs and the logits (2 layers of ~14 ops, the
  # pooler) and over the steps run, and it averages over the batch's independent examples.
  eps = 2.0 ** -8 * np.sqrt(32 * np.arange(1, steps + 1) / batch)
  tolerance = loss * np.maximum(1.0, -np.log(loss)) * eps
  deviation = np.abs(curves["bfloat16"] - loss)
  assert np.all(deviation <= tolerance), (curves, deviation / tolerance)


def test_mixed_bfloat16_sums_gradients_in_float32():
  """Under mixed_bfloat16 the backward pass's long sums are float32 ones: a dense layer's bias
  gradient over many rows (TensorFlow's CPU BiasAddGrad sums bfloat16 in bfloat16: 4096 rows
  of ones gave 256), and the heads compute their logits in float32, so the residuals p - y
  that reach them are not cut to 8 bits before the batch sum (a balanced batch near p = 1/2
  gave a bias gradient of exactly 0). SQuAD's heads build under the policy too."""
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  with precision_policy("bfloat16"):
    dense = TokenDense(3)
    with tf.GradientTape() as tape:
      y = dense(tf.ones([64, 64, 8]))
    assert y.dtype == tf.bfloat16
    np.testing.assert_array_equal(tape.gradient(y, dense.bias).numpy(), 4096.0)  # exact
    heads = [ClassificationHead(2, 32, dropout_rate=0.0), SentenceOrderHead(32, 0.02)]
    for model in (AlbertSquad(config), AlbertSquad(config, version_2=True)):
      out = model(dict(model.encoder.dummy_inputs(2, 8), p_mask=tf.zeros([2, 8])))
      assert all(v.dtype in (tf.float32, tf.int32) for v in out.values()), model.name
  rng = np.random.default_rng(1)
  # [CLS] vectors as at the start of fine-tuning: alike, logits near 0, labels balanced.
  pooled = tf.cast(np.tanh(0.5 + 0.01 * rng.normal(size=(16, 32))), tf.bfloat16)
  labels = np.arange(16) % 2
  for head in heads:
    head(pooled)
    for v in head.weights:
      v.assign(0.001 * rng.normal(size=v.shape))
    reference = type(head).from_config(dict(head.get_config(), dtype="float32"))
    reference(tf.cast(pooled, tf.float32))
    reference.set_weights(head.get_weights())

    def bias_gradient(layer, x):
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, layer(x)))
      return tape.gradient(loss, layer.output_bias).numpy()
    expected = bias_gradient(reference, tf.cast(pooled, tf.float32))  # the same inputs
    assert np.all(np.abs(expected) > 1e-5), expected
    # Both compute in float32 from the same values. The gradient is a near-cancelling mean of
    # residuals p - y (each at most 1 / 16): rounding at that scale, of the batch's 16-row sum
    # after the logits' sums over 32 (two dense layers in SentenceOrderHead).
    np.testing.assert_allclose(bias_gradient(head, pooled), expected, rtol=0, err_msg=head.name,
                               atol=float32_atol([1 / len(labels)], len(labels) + 2 * 32))


def test_mixed_bfloat16_casts_each_shared_kernel_once_per_call(monkeypatch):
  """Keras casts a float32 variable at every read; a block applied L times would cast its
  kernels L times per call. The encoder casts each once per call (`kernels_cast_once`), with
  the same outputs and the same float32 gradients (each use's gradient cast back and summed in
  float32) as the per-use casts."""
  from albert_tf.modeling import encoder as encoder_module  # pylint: disable=g-import-not-at-top
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0  # training calls alike
  with precision_policy("bfloat16"):
    encoder = AlbertEncoder(config)
    inputs = encoder.dummy_inputs(2, 8)
    inputs["input_word_ids"] = tf.constant(np.arange(16).reshape(2, 8) % 50 + 5, tf.int32)
    weights = tf.random.stateless_normal([2, 8, config.hidden_size], [1, 2])

    def traced(training):
      @tf.function
      def run():
        with tf.GradientTape() as tape:
          out = tf.cast(encoder(inputs, training=training)["sequence_output"], tf.float32)
          loss = tf.reduce_sum(out * weights)
        return out, tape.gradient(loss, encoder.trainable_variables)
      graph = run.get_concrete_function().graph
      # Casts of a variable's 2-D value: the kernels (the embedding tables are gathered first).
      kernel_casts = sum(1 for op in graph.get_operations() if op.type == "Cast"
                         and op.inputs[0].op.type == "ReadVariableOp"
                         and op.inputs[0].shape.rank == 2)
      out, grads = run()
      return out.numpy(), [None if g is None else tf.convert_to_tensor(g).numpy()
                           for g in grads], kernel_casts

    runs = {(True, training): traced(training) for training in (False, True)}
    monkeypatch.setattr(encoder_module, "kernels_cast_once", contextlib.nullcontext)
    runs.update({(False, training): traced(training) for training in (False, True)})
  kernels = [v for v in encoder.trainable_variables if v.name.endswith("kernel:0")]
  for training in (False, True):
    out, grads, casts = runs[(True, training)]
    want_out, want_grads, want_casts = runs[(False, training)]
    assert want_casts == 6 * config.num_hidden_layers + 2  # 6 per block use, projection, pooler
    assert casts == len(kernels) == 6 + 2 < want_casts
    np.testing.assert_array_equal(out, want_out)  # the same ops on the same values
    for variable, got, want in zip(encoder.trainable_variables, grads, want_grads):
      if want is not None:
        assert got.dtype == variable.dtype == tf.float32
        # The same float32 terms (one per use of the kernel, L of them), summed in an order of
        # the graph's choosing.
        np.testing.assert_allclose(got, want, rtol=0, err_msg=variable.name,
                                   atol=float32_atol(want, config.num_hidden_layers))


def test_frozen_parts_do_not_move_and_unknown_parts_are_refused(csv_task, tmp_path):
  start, end = trained_weights(opts(csv_task, tmp_path, freeze=("embeddings", "pooler")))
  frozen = [n for n in start if n.startswith(("bert/embeddings/", "bert/pooler/"))
            or "embedding_hidden_mapping_in" in n]
  assert len(frozen) == 9  # 5 embedding, 2 projection, 2 pooler variables
  for name in start:
    if name in frozen:
      np.testing.assert_array_equal(end[name], start[name], err_msg=name)
    else:
      assert not np.array_equal(end[name], start[name]), name
  model = AlbertClassifier(AlbertConfig.from_json_file(csv_task / "tiny_nodropout.json"), 2)
  with pytest.raises(ValueError, match="group_1: this model's parts are embeddings, group_0, "
                     r"pooler \(with full sharing every layer is group_0\)"):
    freeze_parts(model, ["group_1"])


def numpy_distillation(student, teacher, labels, temperature, alpha):
  """Hinton et al.'s loss written out in NumPy: T^2 KL(p_t^T || p_s^T) and CE on labels."""
  def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
  p_t, p_s = softmax(teacher / temperature), softmax(student / temperature)
  kl = (p_t * (np.log(p_t) - np.log(p_s))).sum(-1) * temperature ** 2
  ce = -np.log(softmax(student)[np.arange(len(labels)), labels])
  return alpha * kl + (1 - alpha) * ce


def log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_distillation_loss_matches_a_numpy_reference():
  rng = np.random.default_rng(0)
  student, teacher = (rng.normal(size=(2, 6, 3)) * 3).astype(np.float32)
  labels = rng.integers(0, 3, 6)
  for temperature, alpha in ((1.0, 0.5), (4.0, 0.9), (2.0, 0.0)):
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=student)
    ours = alpha * soft_target_loss(student, teacher, temperature) + (1 - alpha) * ce
    # float32 against float64 on the same logits. The KL's terms p_t log p_t and p_t log p_s
    # nearly cancel: they round at the scale of alpha T^2 log p (and the cross-entropy's at
    # (1 - alpha) log p), each log-softmax a sum of 3 exps, the KL a sum of 3, then 2 more.
    scale = [alpha * temperature ** 2 * np.abs(log_softmax(x.astype(np.float64) / temperature))
             for x in (student, teacher)] + [(1 - alpha) * np.abs(log_softmax(student))]
    np.testing.assert_allclose(ours.numpy(),
                               numpy_distillation(student.astype(np.float64),
                                                  teacher.astype(np.float64), labels,
                                                  temperature, alpha),
                               rtol=0, atol=float32_atol(np.stack(scale), 3 + 3 + 2))
  hidden = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4))
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
  expected = [((hidden[0][b] - hidden[1][b]) ** 2)[mask[b] == 1].mean() for b in range(2)]
  # Computed in float32: the inputs' rounding to it, the difference, the square, then a sum of
  # at most 5 * 4 terms and the division.
  np.testing.assert_allclose(hidden_state_loss(*hidden, mask).numpy(), expected, rtol=0,
                             atol=float32_atol(expected, 5 * 4 + 4))
  assert layer_map(None, 2, 6) == [(1, 3), (2, 6)]
  assert layer_map("1:2,2:4", 2, 6) == [(1, 2), (2, 4)]


def test_a_student_with_the_teachers_depth_and_weights_reproduces_the_teacher(csv_task,
                                                                           tmp_path):
  config = AlbertConfig.from_json_file(csv_task / "tiny_nodropout.json")
  teacher = AlbertClassifier(config, 2)
  native_checkpoint(teacher).write(str(tmp_path / "teacher" / "ckpt-1"))
  config.to_json_file(tmp_path / "teacher" / "albert_config.json")
  options = DistillOptions(teacher_checkpoint=str(tmp_path / "teacher"), temperature=2.0,
                           alpha=1.0, hidden_weight=1.0,
                           student_num_hidden_layers=config.num_hidden_layers)
  distiller = Distiller(options, config, 2, False, str(csv_task / "tiny_nodropout.json"))
  distiller.build()
  student = AlbertClassifier(config, 2)
  load_checkpoint(student, str(tmp_path / "teacher"))
  inputs = {"input_word_ids": tf.constant([[2, 40, 50, 3, 0]]),
            "input_mask": tf.constant([[1, 1, 1, 1, 0]]),
            "input_type_ids": tf.zeros([1, 5], tf.int32)}
  logits = teacher(inputs).numpy()
  # Two models of the same weights: float32 rounding of the logits' chain of sums (the E-term
  # projection, L blocks' I and H, the pooler's and classifier's H), kernels' orders apart, at
  # the scale of the classifier's terms |pooled| |w| (its small weights' sum may cancel).
  terms = (config.embedding_size + config.num_hidden_layers * (config.intermediate_size
                                                               + config.hidden_size)
           + 2 * config.hidden_size)
  pooled = teacher.encoder(inputs, training=False)["pooled_output"].numpy()
  scale = np.abs(pooled) @ np.abs(teacher.head.output_weights.numpy()).T
  np.testing.assert_allclose(student(inputs).numpy(), logits, rtol=0,
                             atol=float32_atol(scale, terms))
  student.head.dropout.rate = 0.0  # the head's fixed dropout would differ from inference
  loss = distiller.per_example_loss(student, dict(inputs, label_ids=tf.constant([1])),
                                    lambda logits, labels: tf.zeros([1]))
  # Nothing left to learn: the loss is 0 up to the rounding of the KL's nearly cancelling terms
  # at the scale of T^2 log p (its 2-term sums, the logs), the hidden-state loss being of the
  # second order in the hidden states' differences.
  scale = options.temperature ** 2 * np.abs(log_softmax(logits.astype(np.float64)
                                                        / options.temperature))
  np.testing.assert_allclose(loss.numpy(), [0.0], rtol=0, atol=float32_atol(scale, 2 + 2))


def test_a_half_depth_student_distils_from_a_run_classifier_teacher(csv_task, one_batch_run,
                                                                   tmp_path):
  teacher_dir = one_batch_run[2]
  distill = DistillOptions(teacher_checkpoint=str(teacher_dir), temperature=2.0, alpha=0.7,
                           hidden_weight=0.5, student_num_hidden_layers=1)
  results = run_classifier(opts(csv_task, tmp_path / "student", do_eval=True, distill=distill))
  assert np.isfinite(results["loss"])
  saved = AlbertConfig.from_json_file(tmp_path / "student" / "albert_config.json")
  assert saved.num_hidden_layers == 1  # exports of the student build the shallow model


def test_sigterm_saves_a_checkpoint_exits_0_and_the_same_command_resumes(csv_task, tmp_path):
  """A real signal to a real run_classifier.py process (a user's CSV task)."""
  out = tmp_path / "out"
  command = [sys.executable, str(ROOT / "run_classifier.py"), "--task_name=csv",
             f"--data_dir={csv_task}", f"--output_dir={out}",
             f"--albert_config_file={ROOT / 'configs' / 'tiny.json'}", f"--spm_model_file={SPM}",
             "--text_a_column=review", "--label_column=stars", "--do_train", "--do_eval",
             "--max_seq_length=16", "--train_batch_size=8", "--train_step=100000",
             "--save_checkpoints_steps=50000", "--iterations_per_loop=50000",
             "--log_every_seconds=1"]
  log = tmp_path / "log.txt"
  with open(log, "w") as stderr:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
      deadline = time.time() + 180
      # Traced: the process is in the first 50000-step loop's call (minutes long).
      while "Traced the training loop" not in log.read_text():
        assert time.time() < deadline and process.poll() is None, log.read_text()[-2000:]
        time.sleep(0.2)
      process.send_signal(signal.SIGTERM)
      code = process.wait(timeout=60)
    finally:
      if process.poll() is None:
        process.kill()
  assert code == 0, log.read_text()[-2000:]
  saved = tf.train.latest_checkpoint(str(out))
  step = int(saved.rsplit("-", 1)[1])
  assert step < 50000, saved  # the in-graph loop stopped within a step, not at its end
  assert "stopped by SIGTERM" in log.read_text()
  finish = [c.replace("--train_step=100000", f"--train_step={step + 4}") for c in command]
  done = subprocess.run(finish, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert f"Resumed from {saved} at step {step}" in done.stderr
  assert tf.train.latest_checkpoint(str(out)).endswith(f"ckpt-{step + 4}")
  assert "accuracy = " in (out / "eval_results.txt").read_text()
  assert not os.path.exists(out / "nonfinite")


def test_progress_rates_leave_out_the_first_loop_that_traces_the_step(monkeypatch, caplog):
  """A 30 s trace then 1 s per 10-step loop of batch 32: 320 examples/s from the second line
  on (cumulative timing would say 80), and the ETA from that rate."""
  from albert_tf.training import progress as progress_module  # pylint: disable=import-outside-toplevel
  clock = [1000.0]
  monkeypatch.setattr(progress_module.time, "time", lambda: clock[0])
  progress = progress_module.Progress(start_step=0, train_steps=100, train_batch_size=32,
                                      log_every_seconds=0.0, describe=lambda results: "")
  caplog.set_level("INFO", logger=progress_module.logger.name)
  for step, seconds in ((10, 31.0), (20, 1.0), (30, 1.0)):
    clock[0] += seconds
    progress(step, {"loss": 1.0, "learning_rate": 1e-4})
  lines = [r.getMessage() for r in caplog.records]
  assert "10.3 examples/s" in lines[0]  # the first loop: all there is to go on
  assert "10.00 steps/s  320.0 examples/s  ETA" in lines[1] and "320.0 examples/s" in lines[2]
  assert lines[2].endswith("ETA " + progress_module.duration(7.0))
