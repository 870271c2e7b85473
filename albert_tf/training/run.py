"""One run of a task: the training loop built around it, and the phases its flags ask for.

    run = Run(ClassificationTask(options), strategy)
    run.run_phases()        # resume or start; train; evaluate; predict (as the flags say)
    run.loop.model          # what was trained

`Run` is the same for every task: after each checkpoint it evaluates the dev data and keeps the
best checkpoint when the task names a `best_metric` and `--do_eval` is set, and with
`--early_stopping_patience` stops training once that many evaluations in a row did not beat the
best; it writes `eval_results.txt` and the eval summaries; a dev evaluation that a stop cut short
is done first when the run resumes. Predictions and the export use the kept best checkpoint's
weights where there is one (the original's `model.ckpt-best`). SIGTERM outside the training loop
stops the phase at once (`preemption.sigterm_raises`): what the phases write appears only whole.
"""

import logging
import os

import tensorflow as tf

from albert_tf import files
from albert_tf.interop.checkpoints import native_checkpoint
from albert_tf.metrics.results import read_result, write_results, write_summaries
from albert_tf.training import recovery
from albert_tf.training.best import BestCheckpoint
from albert_tf.training.loop import TrainingLoop
from albert_tf.training.preemption import sigterm_raises

logger = logging.getLogger(__name__)

EVAL_RESULTS = "eval_results.txt"


class EarlyStopped(Exception):
  """Raised after a dev evaluation to end the training loop: `patience` evaluations in a row
  did not beat the best checkpoint (its checkpoint is written; `Run.train` catches it)."""


class Run:
  """A task and the loop that trains it (built here, from the task's description)."""

  def __init__(self, task, strategy=None):
    o = task.options
    self.task = task
    self.best = BestCheckpoint(o.output_dir, task.best_metric) if task.best_metric else None
    self.best_update_interrupted = bool(self.best and self.best.finish_interrupted_update())
    files.remove_interrupted(o.output_dir, [getattr(o, "export_dir", None)])
    self.loop = TrainingLoop(task, o, strategy, do_train=getattr(o, "do_train", True))
    if getattr(o, "trim_batches", False) and isinstance(self.loop.strategy,
                                                         tf.distribute.TPUStrategy):
      # A TPU compiles one program per shape: batches stay at max_seq_length there.
      logger.info("--trim_batches is off on a TPU (its programs need static shapes)")
      o.trim_batches = False
    self.last_eval = None  # the latest dev results of this run

  def run_phases(self, history=None):
    """Resumes or starts, then trains, evaluates and predicts as the flags ask; returns
    (train results, dev results, predictions), None for a phase not run."""
    o = self.task.options
    self.loop.restore_or_initialize(check_start=self.check_trained)
    trained = evaluated = predicted = None
    if getattr(o, "do_train", False):
      trained = self.train(history)
    if getattr(o, "do_eval", False):
      with sigterm_raises("the evaluation"):
        evaluated = self.last_eval if trained is not None and self.last_eval else self.evaluate()
    if getattr(o, "do_predict", False) or getattr(o, "export_dir", None):
      self.use_best_weights()
    if getattr(o, "do_predict", False):
      with sigterm_raises("the prediction"):
        predicted = self.predict()
    return trained, evaluated, predicted

  def use_best_weights(self):
    """Predictions and the export come from the kept best checkpoint where there is one, as
    the original's run_classifier predicts and exports `model.ckpt-best`: after early stopping
    or a late dip, the last weights are not the model the dev metric chose."""
    prefix = self.best.checkpoint_prefix() if self.best is not None else None
    if prefix is None:
      return
    status = native_checkpoint(self.loop.model).read(prefix).expect_partial()
    status.assert_existing_objects_matched()
    logger.info("Predicting and exporting the best checkpoint's weights (%s = %.4f at step %d): %s",
                self.best.metric, self.best.score(), int(self.best.step()), prefix)

  def check_trained(self):
    """Refuses to evaluate, predict or export without training when the weights are not a
    trained model's (no checkpoint in output_dir; starting weights that leave a part random),
    unless --allow_untrained: such outputs look like results and mean nothing."""
    o = self.task.options
    if getattr(o, "do_train", False) or getattr(o, "allow_untrained", False):
      return
    asked = [f"--{flag}" for flag in ("do_eval", "do_predict", "export_dir")
             if getattr(o, flag, None)]
    reason = self.loop.untrained
    if not asked or reason is None:
      return
    raise ValueError(
        f"{' and '.join(asked)} without --do_train need a trained model: {o.output_dir} holds "
        f"no checkpoint, and {reason}. Point --output_dir at the run that trained it, train "
        "it (--do_train), or give --allow_untrained to use these weights anyway")

  # --- the phases -----------------------------------------------------------------------------
  def train(self, history=None):
    """Trains to the task's step budget; with --do_eval and a `best_metric`, evaluates after
    every checkpoint and keeps the best one. Returns the last loop's metrics (`history`, a
    list, receives every loop's).

    A SIGTERM during the evaluation of a checkpoint (or while it was being kept as the best)
    stops the job at once; resuming from that checkpoint evaluates it first.
    """
    o = self.task.options
    loop = self.loop
    dataset = self.task.train_dataset()
    if self.best is None or not getattr(o, "do_eval", False):
      return loop.fit(dataset, history=history)
    best = [self.best.score()]
    loop.restore_or_initialize()
    step, latest = loop.global_step, loop.manager.latest_checkpoint
    evaluated = read_result(os.path.join(loop.write_dir, EVAL_RESULTS), "global_step")
    if (latest and (step % o.save_checkpoints_steps == 0 or step == loop.train_steps)
        and (evaluated != step or self.best_update_interrupted)):
      logger.info("Evaluating %s, which the run that saved it did not finish evaluating",
                  latest)
      with sigterm_raises(f"the evaluation at step {step}", latest, step):
        best[0] = self.best.keep_if_best(latest, self.evaluate(), best[0])
    if latest and self.patience_spent():  # a resumed run that had stopped early stays stopped
      logger.info("Stopped early at step %d already (%s)", step, self.patience_spent())
      return dict(global_step=step, early_stopped=True)

    def on_checkpoint(saved):
      best[0] = self.best.keep_if_best(saved, self.evaluate(), best[0])
      if self.patience_spent():
        raise EarlyStopped(self.patience_spent())
    try:
      return loop.fit(dataset, on_checkpoint, history)
    except EarlyStopped as e:
      logger.info("Early stopping at step %d of %d: %s", loop.global_step, loop.train_steps, e)
      return dict(global_step=loop.global_step, early_stopped=True)

  def patience_spent(self):
    """With --early_stopping_patience=N: why training stops (the last N evaluations did not
    beat the best checkpoint), else None. Evaluations happen at the multiples of
    save_checkpoints_steps, so the count since the best is read from the two steps alone and a
    resumed run counts as the uninterrupted one would."""
    o = self.task.options
    patience = getattr(o, "early_stopping_patience", None)
    best_step = self.best.step()
    if not patience or best_step is None:
      return None
    every = o.save_checkpoints_steps
    since = self.loop.global_step // every - int(best_step) // every
    if since < patience:
      return None
    return (f"{since} evaluations since the best {self.best.metric} (step {int(best_step)}), "
            f"--early_stopping_patience={patience}")

  def evaluate(self):
    """The task's dev metrics of the current weights, written to eval_results.txt (and the
    eval summaries); non-finite outputs are an error and write nothing."""
    loop = self.loop
    step = loop.global_step
    try:
      results = loop.run_on_data(self.task.evaluate, loop.model, loop.strategy)
    except recovery.NonfiniteOutputs as e:
      raise recovery.nonfinite_eval_error(e.loss, step, loop.manager.latest_checkpoint) from None
    results = dict(results, global_step=step)
    write_results(os.path.join(loop.write_dir, EVAL_RESULTS), results)
    write_summaries(os.path.join(loop.write_dir, "eval"), results, step)
    logger.info("Eval at step %d: %s", step, ", ".join(
        f"{k} = {v:.4f}" for k, v in results.items() if k != "global_step"))
    self.last_eval = results
    return results

  def predict(self):
    """The task's test predictions of the current weights (see `Task.predict`)."""
    loop = self.loop
    return loop.run_on_data(self.task.predict, loop.model, loop.global_step)
