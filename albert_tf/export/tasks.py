"""`--export_dir` of the fine-tuning scripts: the serving model a task describes (`Task.serving`)
built from the model the run trained."""

import logging
import os

from albert_tf.export.ner_serving import export_ner
from albert_tf.export.onnx import OPSET, export_onnx, task_computation
from albert_tf.export.race_serving import export_multiple_choice
from albert_tf.export.squad_serving import export_squad
from albert_tf.export.task_models import export_classifier
from albert_tf.export.tflite import export_classifier_tflite
from albert_tf.jobs import versions

logger = logging.getLogger(__name__)


def _classifier(model, export_dir, tflite_quantize=False, **settings):
  path = export_classifier(model, export_dir, **settings)
  if tflite_quantize:  # token ids -> logits, int8 weights, beside the SavedModel's files
    tflite = os.path.join(path, "classifier.tflite")
    size = export_classifier_tflite(model, tflite, settings["max_seq_length"], quantize=True)
    logger.info("Wrote %s (dynamic-range int8): %.1f MB", tflite, size / 1e6)
  return path


# kind -> (what the model answers, the function that writes it)
EXPORTERS = {
    "classifier": ("raw text in", _classifier),
    "squad": ("question, context -> answer", export_squad),
    "multiple_choice": ("article, question, options -> answer", export_multiple_choice),
    "ner": ("text -> entities", export_ner),
}


def export_task(task, model, export_dir=None):
  """Writes the serving SavedModel `task` describes, of `model`, to `export_dir` (default: the
  task's --export_dir; under it, in a version folder with --export_version), with --onnx (or
  --onnx_quantize) its ONNX file in it; returns its path."""
  serving = task.serving()
  if serving is None:
    raise ValueError(f"{type(task).__name__} has no serving model to export")
  export_dir = export_dir or task.options.export_dir
  export_dir = versions.version_path(export_dir, getattr(task.options, "export_version", None))
  what, write = EXPORTERS[serving.kind]
  path = write(model, export_dir, **serving.settings)
  logger.info("Exported the serving model (%s) to %s", what, path)
  o = task.options
  if getattr(o, "onnx", False) or getattr(o, "onnx_quantize", False):
    export_task_onnx(serving.kind, model, path, quantize=o.onnx_quantize)
  return path


def export_task_onnx(kind, model, export_dir, quantize=False):
  """Writes `<export_dir>/<kind>.onnx`: the task model for ONNX Runtime, token ids in
  (export/onnx.py's `task_computation`), beside the serving SavedModel's files, as
  classifier.tflite is, the model's limits in its metadata (for `run_onnx`'s request checks).
  Returns its path."""
  compute, specs = task_computation(kind, model)
  path = os.path.join(export_dir, f"{kind}.onnx")
  size = export_onnx(compute, path, specs, quantize=quantize, config=model.config)
  logger.info("Wrote %s (opset %d%s): %.1f MB", path, OPSET,
              ", dynamic int8" if quantize else "", size / 1e6)
  return path
