"""Knowledge distillation of a fine-tuned classifier into a student (Hinton et al. 2015).

The student's per-example loss is

    alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T))
    + (1 - alpha) * (the task's loss on the labels)
    + hidden_weight * mean over mapped layers of MSE(project(student_h), teacher_h)

(regression: the soft term is the squared difference to the teacher's prediction). The T^2
keeps the soft gradients' scale independent of T. The teacher runs once per batch in
inference mode and is never trained. An ALBERT student can be the teacher itself applied
fewer times (`student_num_hidden_layers`): with cross-layer sharing, a shallower model has
exactly the teacher's variables, so it starts from the teacher's weights.
"""

import dataclasses
import logging
import os

import tensorflow as tf
import tf_keras

from albert_tf.config import CONFIG_NAME, AlbertConfig
from albert_tf.interop import huggingface
from albert_tf.interop.checkpoints import load_checkpoint
from albert_tf.interop.saved_models import load_saved_model
from albert_tf.jobs.option_fields import flag_name, option
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.dense import TokenDense
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.training.options import check_options

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class DistillOptions:
  """run_classifier.py's distillation flags (checked with the classifier's options, under
  their flags' names)."""
  teacher_checkpoint: str = option(
      None, "Distil: the teacher, a run_classifier output folder (its best/ checkpoint if kept, "
      "else the latest) or a checkpoint of the same task.")
  teacher_config_file: str = option(None, "Distil: the teacher's albert_config.json (default: "
                                    "the one in the teacher's output folder).")
  teacher_export_dir: str = option(
      None, "Distil: the teacher as a classifier SavedModel of run_classifier.py --export_dir "
      "(logits only, no hidden states).")
  temperature: float = option(1.0, "Distil: softmax temperature T of both models.",
                              bound="> 0", flag="distill_temperature")
  alpha: float = option(
      0.5, "Distil: weight of the soft loss (T^2-scaled KL to the teacher's tempered "
      "probabilities); 1 - alpha goes to the labels.", bound="in [0, 1]", flag="distill_alpha")
  hidden_weight: float = option(
      0.0, "Distil: weight of the hidden-state MSE between mapped layers (a learned projection "
      "when the widths differ).", bound=">= 0", flag="distill_hidden_weight")
  layer_map: str = option(
      None, "Distil: student:teacher block pairs, 1-based, e.g. 1:2,2:4,3:6 (default: student "
      "i <- teacher round(i * L_t / L_s)).", flag="distill_layer_map")
  student_num_hidden_layers: int = option(
      None, "Distil: the student is the teacher's ALBERT with its shared block applied this many "
      "times, starting from the teacher's weights.", bound=">= 1")

  @property
  def enabled(self):
    return bool(self.teacher_checkpoint or self.teacher_export_dir)

  def check_teacher_given(self):
    """Distillation flags without a teacher would be ignored without a word: refused."""
    if self.enabled:
      return
    given = [f"--{flag_name(type(self), f.name)}" for f in dataclasses.fields(self)
             if getattr(self, f.name) != f.default]
    if given:
      raise ValueError(f"{', '.join(given)}: distillation flags need a teacher "
                       "(--teacher_checkpoint or --teacher_export_dir)")


def soft_target_loss(student_logits, teacher_logits, temperature):
  """T^2 * KL(p_teacher || p_student) per example, both softmaxed at temperature T."""
  t = float(temperature)
  teacher = tf.nn.softmax(tf.cast(teacher_logits, tf.float32) / t)
  log_student = tf.nn.log_softmax(tf.cast(student_logits, tf.float32) / t)
  log_teacher = tf.math.log(tf.maximum(teacher, 1e-30))
  return t * t * tf.reduce_sum(teacher * (log_teacher - log_student), -1)


def hidden_state_loss(student_hidden, teacher_hidden, input_mask):
  """Per-example MSE over the non-padded tokens: [batch, seq, H] x 2, mask [batch, seq]."""
  mask = tf.cast(input_mask, tf.float32)[:, :, None]
  diff = tf.square(tf.cast(student_hidden, tf.float32) - tf.cast(teacher_hidden, tf.float32))
  width = tf.cast(tf.shape(diff)[-1], tf.float32)
  return tf.reduce_sum(diff * mask, [1, 2]) / (tf.reduce_sum(mask, [1, 2]) * width)


def layer_map(spec, student_layers, teacher_layers):
  """[(student layer, teacher layer)], 1-based block outputs. `spec` "1:2,2:4" or None for
  the uniform map: student layer i <- teacher layer round(i * teacher / student)."""
  if not spec:
    return [(i, max(1, round(i * teacher_layers / student_layers)))
            for i in range(1, student_layers + 1)]
  pairs = []
  for item in spec.split(","):
    try:
      s, t = (int(x) for x in item.split(":"))
    except ValueError:
      raise ValueError(f"--distill_layer_map: {item!r} is not student:teacher") from None
    if not (1 <= s <= student_layers and 1 <= t <= teacher_layers):
      raise ValueError(f"--distill_layer_map: {item} is outside the student's 1..{student_layers}"
                       f" or the teacher's 1..{teacher_layers} layers")
    pairs.append((s, t))
  return pairs


def teacher_config(options, student_config_file):
  """The teacher's config: --teacher_config_file, else the teacher run's albert_config.json
  (or a Hugging Face teacher directory's config.json), else the student's
  --albert_config_file."""
  candidates = [options.teacher_config_file]
  if options.teacher_checkpoint:
    folder = (options.teacher_checkpoint if tf.io.gfile.isdir(options.teacher_checkpoint)
              else os.path.dirname(options.teacher_checkpoint))
    candidates += [os.path.join(folder, CONFIG_NAME),
                   os.path.join(os.path.dirname(folder), CONFIG_NAME)]
    if huggingface.is_huggingface_dir(folder):  # a teacher fine-tuned in transformers
      candidates.append(os.path.join(folder, huggingface.CONFIG_FILE))
  candidates.append(student_config_file)
  for path in candidates:
    if path and tf.io.gfile.exists(path):
      if path == student_config_file and path != options.teacher_config_file:
        # With shared layers a teacher of another depth has the same variables: it would load
        # and run at the student's depth without an error.
        logger.warning("No config beside the teacher %s: it is taken to be the student's %s "
                       "(pass --teacher_config_file if it differs)",
                       options.teacher_checkpoint or options.teacher_export_dir, path)
      return AlbertConfig.from_json_file(path), path
  raise ValueError("no teacher config: pass --teacher_config_file")


class Distiller:
  """The teacher and the student's distillation loss; built under the student's scope."""

  def __init__(self, options, student_config, num_labels, regression, student_config_file):
    self.options = o = options
    check_options(o)
    if o.teacher_checkpoint and o.teacher_export_dir:
      raise ValueError("give --teacher_checkpoint or --teacher_export_dir, not both")
    if o.teacher_export_dir and o.hidden_weight:
      raise ValueError("--distill_hidden_weight needs the teacher's hidden states: use "
                       "--teacher_checkpoint (a SavedModel returns only its outputs)")
    self.num_labels, self.regression = num_labels, regression
    self.student_config = student_config
    self.teacher_config = self.teacher_config_file = None
    if o.teacher_checkpoint:
      self.teacher_config, self.teacher_config_file = teacher_config(o, student_config_file)
    self.pairs = []
    if o.hidden_weight:
      self.pairs = layer_map(o.layer_map, student_config.num_hidden_layers,
                             self.teacher_config.num_hidden_layers)
    self.teacher = self.projection = None

  def build(self):
    """Teacher and projection (call under the strategy scope)."""
    o = self.options
    if o.teacher_checkpoint:
      self.teacher = AlbertClassifier(self.teacher_config, self.num_labels, name="teacher")
      report = load_checkpoint(self.teacher, checkpoint_of(o.teacher_checkpoint))
      logger.info("Teacher (%d layers, %s): %s", self.teacher_config.num_hidden_layers,
                  self.teacher_config_file, report.summary())
      self.teacher.trainable = False
    else:
      self.teacher = load_saved_model(o.teacher_export_dir)
      if "encoded" not in self.teacher.signatures:
        raise ValueError(f"{o.teacher_export_dir} has no 'encoded' signature (token ids -> "
                         "logits): export the teacher with this version of run_classifier.py")
    if self.pairs and self.teacher_config.hidden_size != self.student_config.hidden_size:
      self.projection = TokenDense(self.teacher_config.hidden_size, name="distill_projection")
      self.projection.build([None, None, self.student_config.hidden_size])

  def teacher_outputs(self, inputs):
    """(logits, per-block hidden states or None) of the teacher, in inference mode."""
    if isinstance(self.teacher, tf_keras.Model):
      outputs = self.teacher.encoder(inputs, training=False)
      logits = self.teacher.head(outputs["pooled_output"], training=False)
      hidden = outputs["encoder_outputs"] if self.pairs else None
    else:
      logits = self.teacher.signatures["encoded"](**inputs)["logits"]
      hidden = None
    return (tf.stop_gradient(logits),
            None if hidden is None else [tf.stop_gradient(h) for h in hidden])

  def per_example_loss(self, student, batch, label_loss):
    """The distillation loss of `student` (an AlbertClassifier) on `batch`, per example."""
    o = self.options
    inputs = {n: batch[n] for n in INPUT_NAMES}
    outputs = student.encoder(inputs, training=True)
    logits = student.head(outputs["pooled_output"], training=True)
    teacher_logits, teacher_hidden = self.teacher_outputs(inputs)
    if self.regression:
      soft = tf.square(logits - tf.cast(teacher_logits, tf.float32))
    else:
      soft = soft_target_loss(logits, teacher_logits, o.temperature)
    loss = o.alpha * soft + (1.0 - o.alpha) * label_loss(logits, batch["label_ids"])
    if self.pairs:
      hidden = []
      for s, t in self.pairs:
        h = outputs["encoder_outputs"][s - 1]
        if self.projection is not None:
          h = self.projection(h)
        hidden.append(hidden_state_loss(h, teacher_hidden[t - 1], batch["input_mask"]))
      loss += o.hidden_weight * tf.add_n(hidden) / float(len(hidden))
    return loss

  def trainable_variables(self):
    return [] if self.projection is None else self.projection.trainable_variables


def checkpoint_of(path):
  """A run_classifier output folder means its best checkpoint if it kept one, else its latest."""
  best = os.path.join(path, "best")
  if tf.io.gfile.isdir(path) and tf.io.gfile.isdir(best):
    return best
  return path
