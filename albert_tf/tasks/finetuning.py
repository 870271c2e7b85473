"""What every fine-tuning task shares (classification, SQuAD, RACE, NER): the options of a
starting point and vocabulary, and `FineTuningTask`: the config and tokenizer, the starting
weights (a checkpoint of ours or the original's, a Hugging Face directory, an encoder
SavedModel), the splits read once, and the checks that must fail before any training.
"""

import dataclasses
import logging
import os

import tensorflow as tf

from albert_tf import files
from albert_tf import tokenization
from albert_tf.config import AlbertConfig
from albert_tf.interop import sources
from albert_tf.interop.checkpoints import load_checkpoint
from albert_tf.interop.tf1_names import tf1_variable_map
from albert_tf.jobs import versions
from albert_tf.jobs.option_fields import VERSION, option
from albert_tf.tasks import distillation
from albert_tf.tasks.recipes import RECIPES
from albert_tf.training.optimization import layerwise_lr_multipliers
from albert_tf.training.options import TrainingOptions, check_options, check_sequence_length
from albert_tf.training.task import Schedule, Task

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class FineTuningOptions(TrainingOptions):
  """The flags every fine-tuning job shares: the model's starting point and the vocabulary.
  Each job declares its own do_predict and export_dir (what they write is the job's)."""
  init_checkpoint: str = option(
      None, "Starting weights: our checkpoint, an original TF1 one (albert_zh too), a Hugging "
      "Face ALBERT directory, a TF1 or TF2 Hub model, a Model Garden checkpoint or a keras-hub "
      "preset (the README's table; a config and tokenizer it carries are used unless given).")
  albert_hub_module_handle: str = option(
      None, "Local path of a TF1 Hub module (the original's run_glue.sh: TF Hub "
      "google/albert_base/1-2, extracted) or of an encoder SavedModel (export_savedmodel.py) to "
      "start from.")
  spm_model_file: str = option(None, "SentencePiece model (ALBERT's English models).")
  vocab_file: str = option(
      None, "WordPiece vocab.txt when no --spm_model_file (albert_zh's Chinese models).")
  do_lower_case: bool = option(True, "Lowercase the input.")
  do_train: bool = option(False, "Train.")
  predict_batch_size: int = option(8, "Predict batch.", bound=">= 1")
  export_version: str = option(
      None, "Write the export as --export_dir/<version>/ (TF Serving's layout, served as it is "
      "by TF Serving or serve.py): a positive integer, or auto for the next after the highest "
      "present. Without it the export is --export_dir itself.", bound=VERSION)
  recipe: str = option(
      None, "Fill every flag not given with the original's settings for the task (docs/"
      "fine-tuning.md has the table): albert_paper (the original's run_glue.sh and its "
      "README's SQuAD and RACE commands), albert_zh (albert_zh's CLUE and LCQMC scripts). A "
      "flag given explicitly wins.", choices=RECIPES)
  seeds: tuple = option(
      (), "Fine-tune once per seed, one run after another, each in output_dir/seed-N (a "
      "comma-separated --learning_rate or --train_batch_size makes a grid: every combination), "
      "then write output_dir/summary.json and summary.md (every run's dev metrics, the median "
      "and spread) and keep the best run's checkpoint in output_dir/best and its export in "
      "--export_dir. The same command resumes a stopped sweep; finished runs are not redone.")
  early_stopping_patience: int = option(
      None, "With --do_eval: stop training once this many dev evaluations in a row (one per "
      "checkpoint) did not beat the best checkpoint's metric.", bound=">= 1")
  onnx: bool = option(
      False, "With --export_dir, also write <kind>.onnx beside the serving SavedModel's files: "
      "the task model for ONNX Runtime, token ids in, batch and sequence length dynamic.")
  onnx_quantize: bool = option(
      False, "Write that ONNX file with ONNX Runtime's dynamic int8 quantization (implies "
      "--onnx).")
  # The fields a script got as flags (the rest are defaults): these win over --recipe.
  given: tuple = dataclasses.field(default=(), compare=False)
  # {field: values} of a comma-separated --learning_rate / --train_batch_size: a sweep's grid
  # (the field itself holds the first value).
  grid: dict = dataclasses.field(default_factory=dict)

  # The flags a comma-separated list turns into a grid of runs (script_flags.py).
  SWEPT = ("learning_rate", "train_batch_size")


class FineTuningTask(Task):
  """What every fine-tuning task shares. Subclasses build the model (`build_model`), read their
  splits (`read_examples`) and give the per-example loss of a batch
  (`per_example_loss(model, batch)`); the loop normalises it over the global batch."""

  def __init__(self, options, train_steps, warmup_steps):
    o = options
    check_options(o)
    self.options = o
    self.config_file, self.config = _model_config(o)
    self.distill = getattr(o, "distill", None)
    if self.distill is not None and not self.distill.enabled:
      self.distill.check_teacher_given()
      self.distill = None
    if self.distill is not None and self.distill.student_num_hidden_layers:
      # The teacher's shared block applied fewer times: the same variables, fewer layers.
      self.config = self.config.replace(
          num_hidden_layers=self.distill.student_num_hidden_layers)
    check_sequence_length(o.max_seq_length, self.config)
    if o.early_stopping_patience and not (getattr(o, "do_eval", False) and self.best_metric):
      raise ValueError("--early_stopping_patience needs dev evaluations during training "
                       "(--do_eval" + ("" if hasattr(o, "do_eval") else
                                       ", which this script does not have") + ")")
    self.tokenizer = tokenization.FullTokenizer(
        vocab_file=None if o.spm_model_file else getattr(o, "vocab_file", None),
        do_lower_case=o.do_lower_case, spm_model_file=o.spm_model_file)
    if self.tokenizer.vocab_size != self.config.vocab_size:
      raise ValueError(f"the tokenizer has {self.tokenizer.vocab_size} entries but "
                       f"{o.albert_config_file} says vocab_size={self.config.vocab_size}")
    files.check_writable(o.output_dir)
    if o.export_dir:
      check_export_dir(o.export_dir, getattr(o, "export_version", None))
    self.read_data()
    self._schedule = Schedule(train_steps, warmup_steps)

  def model_config(self):
    return self.config, self.config_file

  def schedule(self):
    return self._schedule

  def vocabulary(self):
    """The tokenizer's files and casing, as the exports take them."""
    o = self.options
    return dict(spm_model_file=o.spm_model_file,
                vocab_file=None if o.spm_model_file else o.vocab_file,
                do_lower_case=o.do_lower_case)

  def per_example_loss(self, model, batch):
    """float32 [per-replica batch] losses of `batch` in training mode."""
    raise NotImplementedError

  def train_loss(self, model, batch, normalizers):
    return tf.reduce_sum(self.per_example_loss(model, batch)) / normalizers["examples"], None

  # --- data ---------------------------------------------------------------------------------
  def read_examples(self, split):
    """The examples of `split` ("train", "dev" or "test") as the task reads them."""
    raise NotImplementedError

  def examples(self, split):
    """The examples of `split`, read once per task."""
    cache = self.__dict__.setdefault("_examples", {})
    if split not in cache:
      cache[split] = self.read_examples(split)
    return cache[split]

  def read_data(self):
    """Reads every split the flags ask for before the model is built: a missing or broken dev
    or test split must fail now, not after hours of training."""
    for split, flag in (("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict")):
      if getattr(self.options, flag, False):
        try:
          self.examples(split)
        except FileNotFoundError as e:
          raise FileNotFoundError(f"--{flag}: {e}") from None

  def train_steps_flag(self):
    o = self.options
    if getattr(o, "num_train_epochs", None) is not None:
      return f"--num_train_epochs={o.num_train_epochs:g} ({self.schedule().train_steps} steps)"
    return f"--train_step={o.train_step}"

  def lr_multipliers(self, model):
    if getattr(self.options, "layerwise_lr_decay", None) is None:
      return None
    return layerwise_lr_multipliers(tf1_variable_map(model), self.options.layerwise_lr_decay)

  def initialize(self, model):
    start = self.options.albert_hub_module_handle or self.options.init_checkpoint
    if (not start and self.distill is not None and self.distill.student_num_hidden_layers
        and self.distill.teacher_checkpoint):
      start = distillation.checkpoint_of(self.distill.teacher_checkpoint)
      logger.info("The student starts from the teacher's weights: %s", start)
    if start:
      report = load_checkpoint(model, start)
      logger.info(report.summary())
      return report
    logger.warning("no --init_checkpoint or --albert_hub_module_handle: starting from random "
                   "weights")
    return None


def _model_config(options):
  """(where the config came from, AlbertConfig): --albert_config_file, else the config that the
  starting point carries without a file of its own (a TF Hub SavedModel's Keras metadata)."""
  if options.albert_config_file:
    return options.albert_config_file, AlbertConfig.from_json_file(options.albert_config_file)
  start = options.albert_hub_module_handle or options.init_checkpoint
  fmt = sources.detect(os.fspath(start)) if start else None
  if fmt:
    config = sources.read(os.fspath(start), fmt, with_arrays=False).config
    if config is not None:
      return start, AlbertConfig.from_dict(config, source=start)
  raise ValueError("--albert_config_file is needed" + (
      f": {start} does not carry the model's config" if start else
      " (or an --init_checkpoint that carries the model's config)"))


def check_export_dir(export_dir, version=None):
  """Before training, what would make the export fail after it: the export is written beside
  its path (a temporary folder renamed into place), so the folder that holds it must be
  writable (`export_dir` itself with a `version`: TF Serving's base path), and an existing
  `version` is never replaced. Returns where the export will go."""
  if version is None or version == "":
    files.check_writable(os.path.dirname(export_dir.rstrip("/")) or ".",
                         flag="--export_dir's folder")
  else:
    files.check_writable(export_dir, flag="--export_dir")
  return versions.version_path(export_dir, version)


def check_cache_writable(flag, path):
  """Before training: the folder of a feature cache that a late phase (evaluation, prediction)
  will build must be writable now, not hours later."""
  if path and not files.exists(path):
    files.check_writable(os.path.dirname(path) or ".", flag=f"{flag}'s folder")
