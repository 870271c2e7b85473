"""Everything serving needs from one checkpoint: encoder SavedModel, preprocessing, sentence
embeddings, fill-mask, TFLite."""

import dataclasses
import logging
import os

from albert_tf import files
from albert_tf.config import AlbertConfig
from albert_tf.export.encoder import export_encoder, export_tflite
from albert_tf.export.onnx import OPSET, check_onnx_options, export_encoder_onnx
from albert_tf.interop.checkpoints import load_checkpoint
from albert_tf.jobs import versions
from albert_tf.jobs.option_fields import VERSION, option, sequence_length
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.training.options import check_sequence_length
from albert_tf.training.precision import precision_policy

logger = logging.getLogger(__name__)

# What an export writes into export_dir; a folder holding anything else is not replaced.
BUNDLE_ENTRIES = ("encoder", "preprocessing", "embed", "fill_mask", "encoder.tflite",
                  "encoder.onnx")


SERVING_DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass
class BundleOptions:
  """export_savedmodel.py's flags: `export_bundle`'s arguments."""
  albert_config_file: str = option(None, "albert_config.json of the model.")
  checkpoint: str = option(None, "Checkpoint: ours, or an original TF1 / TF-Hub one.")
  export_dir: str = option(None, "Output folder.")
  spm_model_file: str = option(None, "SentencePiece model for the preprocessing model.")
  vocab_file: str = option(None, "WordPiece vocab.txt (when no --spm_model_file).")
  do_lower_case: bool = option(True, "Lowercase in the preprocessing model.")
  max_seq_length: int = sequence_length(
      128, "Sequence length of the preprocessing model (and of the TFLite model).")
  tflite: bool = option(False, "Also write encoder.tflite.")
  jit_compile: bool = option(
      False, "Compile the encoder's signatures with XLA (faster on CPUs; XLA compiles once per "
      "input shape; TF Serving then needs --xla_cpu_compilation_enabled=true).")
  tflite_quantize: bool = option(
      False, "Write encoder.tflite with dynamic-range int8 weights (about a quarter of the "
      "float32 size; implies --tflite).")
  serving_dtype: str = option(
      "float32", "Compute dtype of the exported models: bfloat16 for CPUs with AVX512_BF16 / "
      "AMX and for GPUs, float16 for GPUs (weights stay float32; softmax, LayerNorm and the "
      "outputs float32; inputs and outputs are unchanged).",
      choices=SERVING_DTYPES)
  export_version: str = option(
      None, "Write TF Serving's layout: each SavedModel as --export_dir/<model>/<version>/ "
      "(other files in the encoder version's assets.extra/), earlier versions kept: a positive "
      "integer, or auto for the next after the highest present.", bound=VERSION)
  onnx: bool = option(
      False, "Also write encoder.onnx (token ids in, pooled and sequence output out; batch "
      "and sequence length dynamic; for ONNX Runtime).")
  onnx_quantize: bool = option(
      False, "Write encoder.onnx with ONNX Runtime's dynamic int8 quantization (about a "
      "quarter of the float32 size; implies --onnx).")


def check_bundle_options(o):
  """Refuses, before any work, a combination of BundleOptions that cannot work, saying why."""
  if o.serving_dtype not in SERVING_DTYPES:
    raise ValueError(f"--serving_dtype={o.serving_dtype!r}: one of {', '.join(SERVING_DTYPES)}")
  if o.serving_dtype != "float32" and (o.tflite or o.tflite_quantize):
    raise ValueError("--tflite converts a float32 model; export it with "
                     "--serving_dtype=float32")
  if o.onnx or o.onnx_quantize:
    check_onnx_options(o.serving_dtype)


def export_bundle(albert_config_file, checkpoint, export_dir, **settings):
  """Writes `encoder/`; `preprocessing/`, `embed/` (raw text -> sentence vectors,
  task_models.EmbeddingModel) and `fill_mask/` when a vocabulary is given (fill_mask when the
  checkpoint has the MLM head too); and `encoder.tflite` (with `tflite`, or
  `tflite_quantize`: its weights dynamic-range int8, about a quarter of the float32 size).
  `onnx` (or `onnx_quantize`: ONNX Runtime's dynamic int8) writes `encoder.onnx` too
  (export/onnx.py).
  `settings`: the other fields of BundleOptions, by name (their defaults otherwise).

  Returns `{name: path}`. The checkpoint may be ours or the original's (TF1, TF-Hub module);
  a checkpoint of another shape is an error naming both variables, before anything is written.
  `jit_compile`: the encoder's signatures as XLA clusters (`export_encoder`); the preprocessing,
  embed and fill_mask models (string ops, which XLA cannot compile) stay plain graphs.
  `serving_dtype="bfloat16"`: the models compute in bfloat16 (Keras' mixed_bfloat16: weights
  kept float32, softmax, LayerNorm and outputs float32), for CPUs with AVX512_BF16 / AMX and
  for GPUs; `"float16"` the same in float16 (mixed_float16), for GPUs. Inputs and outputs
  stay as they are.

  `export_dir` is replaced as a whole: the bundle is written into a sibling temporary folder
  and renamed into place, so no model of a previous export survives beside the new ones, and
  a failed or killed export leaves the previous bundle as it was. With `export_version`, it is
  a TF Serving model base instead: each SavedModel goes to `<name>/<version>/` beside the
  versions already there (`_into_versions`), never replacing one.
  """
  o = BundleOptions(albert_config_file, checkpoint, export_dir, **settings)
  check_bundle_options(o)
  config = AlbertConfig.from_json_file(albert_config_file)
  check_sequence_length(o.max_seq_length, config)
  export_dir = os.path.normpath(os.fspath(export_dir))
  version = versions.parse_version(o.export_version)
  if os.path.exists(export_dir) and not os.path.isdir(export_dir):
    raise NotADirectoryError(f"--export_dir={export_dir} exists and is not a directory")
  if version is not None:
    version = _bundle_version(export_dir, version)
  elif os.path.isdir(export_dir):
    foreign = sorted(set(os.listdir(export_dir)) - set(BUNDLE_ENTRIES))
    if foreign:  # Replacing the folder would delete them: never lose what export did not write.
      raise FileExistsError(
          f"--export_dir={export_dir} holds files that are not an exported bundle "
          f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}); the export "
          "replaces the whole folder, so give it a new or bundle-only folder")
  # Through a symlink, the link's target is replaced and the link stays.
  target = os.path.realpath(export_dir)
  with precision_policy(o.serving_dtype):  # the policy in force when the layers are built
    model = AlbertPretrainer(config)
  report = load_checkpoint(model, checkpoint)
  if report.missing:
    logger.warning("not in the checkpoint (left as initialised): %s", report.missing)

  def write(folder):
    return _write_bundle(model, report.restored(model.masked_lm.variables), folder,
                         o.spm_model_file, o.vocab_file, o.do_lower_case, o.max_seq_length,
                         o.tflite or o.tflite_quantize, o.tflite_quantize, o.jit_compile,
                         o.onnx or o.onnx_quantize, o.onnx_quantize)

  if version is not None:
    paths = _export_version(write, target, version)
  else:
    files.remove_interrupted(paths=[target])  # what killed exports left beside it
    # Written into a temporary sibling that replaces the whole folder when complete; a failure
    # (KeyboardInterrupt too) removes it and leaves the previous bundle as it was.
    with files.atomic_path(target) as tmp_dir:
      written = write(tmp_dir)
    paths = {name: os.path.join(export_dir, os.path.relpath(path, tmp_dir))
             for name, path in written.items()}
  for name, path in paths.items():
    logger.info("exported %s: %s", name, path)
  return paths


def _bundle_version(export_dir, version):
  """The version the bundle's models are written as: `version`, or for "auto" the next after
  the highest of any of them; one already present is refused before any work."""
  if version == "auto":
    present = [v for name in BUNDLE_ENTRIES
               for v in versions.versions(os.path.join(export_dir, name))]
    version = max(present, default=0) + 1
  for name in BUNDLE_ENTRIES:
    path = os.path.join(export_dir, name, str(version))
    if os.path.exists(path):
      raise FileExistsError(f"--export_version={version}: {path} exists (a served version is "
                            "never replaced; give a new version or auto)")
  return version


def _export_version(write, export_dir, version):
  """`write`s the bundle into a temporary folder inside `export_dir`, then places its models
  as `version` (`_into_versions`); a failure or a kill leaves only that temporary, which the
  next export removes."""
  files.remove_interrupted(paths=[os.path.join(export_dir, "bundle")])
  written_dir = files.temporary_name(os.path.join(export_dir, "bundle"))
  files.makedirs(export_dir)
  try:
    return _into_versions(written_dir, export_dir, version, write(written_dir))
  except BaseException:
    files.remove_quietly(written_dir)
    raise


def _into_versions(written_dir, export_dir, version, written):
  """Renames each SavedModel of the complete bundle `written_dir` to
  `export_dir/<name>/<version>` (one rename each: a model server never sees a half-written
  version), its other files first moved into the encoder's assets.extra/ (which model servers
  do not read). `written`: {key: path under written_dir}; returns {key: final path}."""
  extra = os.path.join("encoder", str(version), "assets.extra")
  placed = {top: os.path.join(top, str(version))
            if files.exists(os.path.join(written_dir, top, versions.SAVED_MODEL))
            else os.path.join(extra, top) for top in files.listdir(written_dir)}
  for top, path in placed.items():
    if path.startswith(extra):
      files.makedirs(os.path.join(written_dir, "encoder", "assets.extra"))
      files.rename(os.path.join(written_dir, top),
                   os.path.join(written_dir, "encoder", "assets.extra", top))
  for top, path in sorted(placed.items()):
    if not path.startswith(extra):
      files.makedirs(os.path.join(export_dir, top))
      files.rename(os.path.join(written_dir, top), os.path.join(export_dir, path))
  files.remove(written_dir)
  paths = {}
  for key, path in written.items():
    top, _, rest = os.path.relpath(path, written_dir).partition(os.sep)
    paths[key] = os.path.join(export_dir, placed[top], rest).rstrip(os.sep)
  return paths


def _write_bundle(model, has_mlm_head, export_dir, spm_model_file, vocab_file, do_lower_case,
                  max_seq_length, tflite, tflite_quantize, jit_compile, onnx=False,
                  onnx_quantize=False):
  files.makedirs(export_dir)
  paths = {"encoder": export_encoder(model, os.path.join(export_dir, "encoder"),
                                     jit_compile=jit_compile)}
  if spm_model_file or vocab_file:
    from albert_tf.export.preprocessing import save_preprocessing_model  # pylint: disable=g-import-not-at-top
    from albert_tf.export.task_models import export_embedding, export_fill_mask  # pylint: disable=g-import-not-at-top
    vocab = dict(spm_model_file=spm_model_file,
                 vocab_file=None if spm_model_file else vocab_file, do_lower_case=do_lower_case,
                 max_seq_length=max_seq_length)
    paths["preprocessing"] = save_preprocessing_model(os.path.join(export_dir, "preprocessing"),
                                                      **vocab)
    paths["embed"] = export_embedding(model.encoder, os.path.join(export_dir, "embed"), **vocab)
    if has_mlm_head:
      paths["fill_mask"] = export_fill_mask(model, os.path.join(export_dir, "fill_mask"),
                                            **vocab)
    else:
      logger.warning("the checkpoint has no MLM head: no fill_mask model")
  if tflite:
    path = os.path.join(export_dir, "encoder.tflite")
    size = export_tflite(paths["encoder"], path, max_seq_length=max_seq_length,
                         quantize=tflite_quantize)
    if tflite_quantize:  # the float32 file would be its weights' 4 bytes each, plus the graph
      logger.info("TFLite encoder, dynamic-range int8: %.1f MB (float32 weights: %.1f MB)",
                  size / 1e6, 4 * model.encoder.count_params() / 1e6)
    else:
      logger.info("TFLite encoder: %.1f MB", size / 1e6)
    paths["tflite"] = path
  if onnx:
    path = os.path.join(export_dir, "encoder.onnx")
    size = export_encoder_onnx(model, path, quantize=onnx_quantize)
    logger.info("ONNX encoder (opset %d%s): %.1f MB", OPSET,
                ", dynamic int8" if onnx_quantize else "", size / 1e6)
    paths["onnx"] = path
  return paths
