"""Everything serving needs from one checkpoint: encoder SavedModel, preprocessing, TFLite."""

import logging
import os

from albert_tf.checkpoints import load_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.export.encoder import export_encoder, export_tflite
from albert_tf.modeling.pretrainer import AlbertPretrainer

logger = logging.getLogger(__name__)


def export_bundle(albert_config_file, checkpoint, export_dir, spm_model_file=None,
                  vocab_file=None, do_lower_case=True, max_seq_length=128, tflite=False,
                  jit_compile=False):
  """Writes `encoder/`, `preprocessing/` and `fill_mask/` (when a vocabulary is given and,
  for fill_mask, the checkpoint has the MLM head), and `encoder.tflite`.

  Returns `{name: path}`. The checkpoint may be ours or the original's (TF1, TF-Hub module);
  a checkpoint of another shape is an error naming both variables, before anything is written.
  `jit_compile`: the encoder's signatures as XLA clusters (`export_encoder`); the preprocessing
  and fill_mask models (string ops, which XLA cannot compile) stay plain graphs.
  """
  config = AlbertConfig.from_json_file(albert_config_file)
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"--max_seq_length={max_seq_length} exceeds the config's "
                     f"max_position_embeddings={config.max_position_embeddings}")
  model = AlbertPretrainer(config)
  report = load_checkpoint(model, checkpoint)
  if report.missing:
    logger.warning("not in the checkpoint (left as initialised): %s", report.missing)
  os.makedirs(export_dir, exist_ok=True)
  paths = {"encoder": export_encoder(model, os.path.join(export_dir, "encoder"),
                                jit_compile=jit_compile)}
  if spm_model_file or vocab_file:
    from albert_tf.export.preprocessing import save_preprocessing_model  # pylint: disable=g-import-not-at-top
    from albert_tf.export.task_models import export_fill_mask  # pylint: disable=g-import-not-at-top
    vocab = dict(spm_model_file=spm_model_file,
                 vocab_file=None if spm_model_file else vocab_file, do_lower_case=do_lower_case,
                 max_seq_length=max_seq_length)
    paths["preprocessing"] = save_preprocessing_model(os.path.join(export_dir, "preprocessing"),
                                                      **vocab)
    if report.restored(model.masked_lm.variables):
      paths["fill_mask"] = export_fill_mask(model, os.path.join(export_dir, "fill_mask"),
                                            **vocab)
    else:
      logger.warning("the checkpoint has no MLM head: no fill_mask model")
  if tflite:
    path = os.path.join(export_dir, "encoder.tflite")
    size = export_tflite(paths["encoder"], path, max_seq_length=max_seq_length)
    logger.info("TFLite encoder: %s (%.1f MB)", path, size / 1e6)
    paths["tflite"] = path
  for name, path in paths.items():
    logger.info("exported %s: %s", name, path)
  return paths
