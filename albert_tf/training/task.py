"""What a task tells the training loop, and nothing more (Model Garden's Task, in small).

A task describes one job: the model it trains, its inputs and loss, its metrics, its starting
weights, how it evaluates and predicts, and what it exports. It holds no training state: the
loop (`loop.TrainingLoop`) builds the model, optimizer and checkpoints from this description,
and a `run.Run` drives the phases the flags ask for. Every method the loop calls receives the
model it needs; a task never reaches back into the loop.
"""

import dataclasses

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Schedule:
  """The step budget and learning-rate schedule of a task (the original's flags)."""
  train_steps: int = 0
  warmup_steps: int = 0
  start_warmup_step: int = 0
  poly_power: float = 1.0


@dataclasses.dataclass(frozen=True)
class Serving:
  """What a task's `--export_dir` holds: a serving model of `kind` ("classifier", "squad",
  "multiple_choice", "ner"), built by the export layer from the trained model and `settings`
  (the tokenizer's files, lengths, labels...)."""
  kind: str
  settings: dict = dataclasses.field(default_factory=dict)


class Task:
  """A job for the training loop. Subclasses set `options` (a `TrainingOptions`) and override
  what their job needs; the defaults describe a task that trains every variable of its model
  on a per-example loss averaged over the global batch."""

  options = None
  best_metric = None  # the dev metric that picks the best checkpoint (higher is better)

  # --- the model ------------------------------------------------------------------------------
  def model_config(self):
    """(AlbertConfig, the file it came from): saved in output_dir, checked on resume."""
    raise NotImplementedError

  def model_flags(self):
    """Flags besides the config that shape the model's variables (checked on resume)."""
    return {}

  def build_model(self):
    """The trained Keras model (called under the strategy scope and precision policy)."""
    raise NotImplementedError

  def initialize(self, model):
    """Loads the starting weights when there is no checkpoint to resume; returns the
    `LoadReport` of what was loaded, or None when nothing was (random weights)."""
    del model
    return None

  def checkpoint_items(self):
    """Trackables trained besides the model (saved and restored with it), built by
    `build_model`."""
    return {}

  def trainable_variables(self, model):
    return model.trainable_variables

  def lr_multipliers(self, model):
    """{variable name: learning-rate factor}, or None (every variable at the full rate)."""
    return None

  # --- training -------------------------------------------------------------------------------
  def schedule(self):
    return Schedule()

  def train_steps_flag(self):
    """The flag that set the step budget, with its value (for messages)."""
    return f"--num_train_steps={self.schedule().train_steps}"

  def train_dataset(self):
    """Global training batches, repeating."""
    raise NotImplementedError

  def normalizers(self, batch):
    """Per-replica sums that, summed over replicas, normalise the loss (default: examples)."""
    return {"examples": tf.cast(tf.shape(batch[next(iter(batch))])[0], tf.float32)}

  def train_loss(self, model, batch, normalizers):
    """(this micro-batch's share of the global-batch loss, aux for the metrics' update)."""
    raise NotImplementedError

  def build_metrics(self):
    """Train metrics besides the loss: an object with update(batch, aux), result(), reset()."""
    return None

  def progress(self, results):
    """Extra fields of the progress line."""
    return ""

  def locate_bad_record(self, error):
    """An error naming the input file behind a record error, or None."""
    return None

  # --- evaluation and prediction, on the loop's model -----------------------------------------
  def evaluate(self, model, strategy):
    """{metric: value} on the dev data (the loss among them where there is one). Raises
    `recovery.NonfiniteOutputs` when the model's outputs are not finite."""
    raise NotImplementedError

  def majority_baseline(self):
    """(the majority label's share, examples) of the dev data, for a classifier whose
    evaluations score accuracy; None for other tasks. A sweep names a run whose kept model
    scores exactly that share a constant classifier (`metrics/sweeps.py`)."""
    return None

  def predict(self, model, step):
    """Writes the test predictions (and their scores, when the data has answers); returns
    what the job reports."""
    raise NotImplementedError

  # --- what it exports ------------------------------------------------------------------------
  def serving(self):
    """The serving model `--export_dir` writes (a `Serving`), or None for none."""
    return None
