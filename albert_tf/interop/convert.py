"""Converts ALBERT checkpoints between the original's TF1 format, ours and Hugging Face's.

    converted = read("tf1", "albert_base/model.ckpt-best",
                     albert_config_file="albert_base/albert_config.json",
                     spm_model_file="albert_base/30k-clean.model")
    write(converted, "huggingface", "albert_base_hf")  # read + write: convert(...)

On the command line: `python -m albert_tf.cli.convert` (albert_tf/cli/convert.py).

Formats: `tf1` (the original's variable names), `native` (our `tf.train.Checkpoint`s, e.g. a
run_classifier output dir), `huggingface` (`config.json`, `model.safetensors`, tokenizer
files). The head (pretraining MLM + SOP, sequence classification / regression, multiple
choice, SQuAD v1 question answering, run_ner's token classification, or the encoder alone) is
found from the names and, for a transformers directory, config.json's `architectures`; `--head`
says it where names cannot (a one-output head is regression unless `--head=multiple_choice`).
A token classifier's tag names travel with it: run_ner's model_flags.json beside a native or
TF1 checkpoint <-> config.json's id2label. Its CRF (run_ner --use_crf) converts between native
and TF1; transformers has no CRF, so such a model goes to huggingface with --head=encoder only.
Every weight of the source is checked against the model before anything is written; the
output directory appears whole or not at all.
"""

import dataclasses
import logging
import os
import shutil

import tensorflow as tf

from albert_tf import files
from albert_tf.config import CONFIG_NAME, MODEL_FLAGS_NAME, AlbertConfig
from albert_tf.interop import checkpoints
from albert_tf.interop import huggingface
from albert_tf.interop import sources
from albert_tf.interop import tf1_names
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.modeling.token_classifier import AlbertTokenClassifier

logger = logging.getLogger(__name__)

FORMATS = ("tf1", "native", "huggingface")
# What other libraries write, read (sources.py) but not written, except Model Garden's.
FOREIGN_FORMATS = ("tfhub", "tfhub_tf1", "model_garden", "keras_hub")
INPUT_FORMATS = FORMATS + FOREIGN_FORMATS
OUTPUT_FORMATS = FORMATS + ("model_garden",)
HEADS = ("auto", "pretraining", "classification", "multiple_choice", "squad_v1", "squad_v2",
         "token_classification", "encoder")
# The TF1 names that tell a token classifier and its CRF (AlbertTokenClassifier's).
TOKEN_HEAD_NAME = "token_classifier/output_weights"
CRF_NAME = "token_classifier/crf/transitions"


@dataclasses.dataclass
class Converted:
  """A model holding the weights read from a source, and what to write with them."""
  model: object
  config: AlbertConfig
  head: str
  report: checkpoints.LoadReport
  num_labels: int = None
  spm_model_file: str = None
  vocab_file: str = None
  do_lower_case: bool = True
  labels: list = None  # a token classifier's tag names, in id order
  use_crf: bool = False
  model_flags: dict = None  # the source's model_flags.json (run_ner's other flags ride along)


def build_model(config, head, num_labels=None, labels=None, use_crf=False):
  """The Keras model that holds `head`'s weights (see the module doc for the kinds);
  `labels` and `use_crf` are a token classifier's (the CRF's allowed transitions follow from
  the labels)."""
  if head in ("pretraining", "masked_lm"):
    return AlbertPretrainer(config)
  if head == "classification":
    return AlbertClassifier(config, num_labels)
  if head == "multiple_choice":
    return AlbertMultipleChoice(config).build_for()
  if head in ("squad_v1", "squad_v2"):
    return AlbertSquad(config, version_2=head == "squad_v2")
  if head == "token_classification":
    return AlbertTokenClassifier(config, labels or _placeholder_labels(num_labels),
                                 use_crf=use_crf)
  if head == "encoder":
    return AlbertEncoder(config)
  raise ValueError(f"unknown head {head!r}; one of {', '.join(HEADS)}")


def _placeholder_labels(num_labels):
  return [f"LABEL_{i}" for i in range(num_labels)]  # transformers' names for unnamed labels


def _tf1_shapes(fmt, path, hf_values=None):
  """{original TF1 name: shape} of a checkpoint's model weights, to tell its head."""
  if fmt in FOREIGN_FORMATS:
    return {name: list(value.shape) for name, value in sources.read(path, fmt).arrays.items()}
  if fmt == "huggingface":
    return huggingface.to_tf1_shapes(huggingface.read_huggingface_shapes(path),
                                     huggingface.head_of_architecture(hf_values))
  prefix = checkpoints.resolve_checkpoint_path(path)
  shapes = checkpoints.open_reader(prefix).get_variable_to_shape_map()
  if fmt == "tf1":
    return {n[len(checkpoints.HUB_PREFIX):] if n.startswith(checkpoints.HUB_PREFIX) else n: s
            for n, s in shapes.items()}
  # Ours: the head parts are named by role (checkpoints.HEAD_ROLES).
  roles = {n.split("/")[0] for n in shapes}
  names = {}
  if "masked_lm" in roles:
    names["cls/predictions/output_bias"] = None
  if "sentence_order" in roles:
    names["cls/seq_relationship/output_weights"] = None
  if "head" in roles:
    names["output_weights"] = shapes.get("head/output_weights/.ATTRIBUTES/VARIABLE_VALUE")
  if any(n.startswith("squad_head/start_dense/") for n in shapes):
    names["start_logits/dense/kernel"] = None
  elif "squad_head" in roles:
    names["cls/squad/output_weights"] = None
  if "token_head" in roles:
    names[TOKEN_HEAD_NAME] = shapes.get("token_head/output_weights/.ATTRIBUTES/VARIABLE_VALUE")
  if "crf" in roles:
    names[CRF_NAME] = None
  return names


def _detect_head(fmt, path, requested, hf_values=None):
  """(head, num_labels) from the names (and a transformers config's `architectures`)."""
  shapes = _tf1_shapes(fmt, path, hf_values)
  head = huggingface.head_of(shapes)
  if huggingface.head_of_architecture(hf_values) == "multiple_choice":
    head = "multiple_choice"  # a one-label classifier's names
  unknown = huggingface.unknown_architecture(hf_values)
  if unknown and requested != "encoder":
    raise ValueError(f"{path}: config.json's architectures is {unknown}, which has no "
                     "albert-tf model (these do: "
                     f"{', '.join(sorted(huggingface.HEAD_OF_ARCHITECTURE))}); --head=encoder "
                     "converts its encoder alone")
  num_labels = None
  if head == "classification":
    num_labels = shapes["output_weights"][0]
    if hf_values and hf_values.get("id2label") is not None:
      num_labels = huggingface.num_labels_of(hf_values)
  elif head == "token_classification":
    num_labels = shapes[TOKEN_HEAD_NAME][0]
  if requested and requested != "auto":
    if requested == "multiple_choice" and head == "classification" and num_labels != 1:
      raise ValueError(f"{path}: --head=multiple_choice needs a one-output head, this one has "
                       f"{num_labels}")
    if requested not in ("encoder", head) and not (
        requested == "multiple_choice" and head == "classification"):
      raise ValueError(f"{path} holds a {head} head, not {requested}")
    head = requested
  elif head == "classification" and num_labels == 1 and fmt != "huggingface":
    logger.info("A one-output head is read as regression; --head=multiple_choice for a RACE "
                "(multiple choice) model.")
  return head, num_labels


def _token_head_flags(fmt, path, num_labels, hf_values):
  """(labels, use_crf, model_flags) of a token-classification source. The labels are
  config.json's id2label, or those of the model_flags.json run_ner keeps beside its
  checkpoints (and that a --do_predict run reads them from, NerTask._labels); else
  transformers' LABEL_i. The CRF is there when its transitions are."""
  use_crf = CRF_NAME in _tf1_shapes(fmt, path, hf_values)
  flags = {}
  if fmt == "huggingface":
    labels, source = huggingface.labels_of(hf_values), "config.json's id2label"
  else:
    source = _beside(path, MODEL_FLAGS_NAME)
    if os.path.exists(source):
      flags = huggingface.read_json(source)
    labels = flags.get("labels")
  if not labels:
    if use_crf:
      raise ValueError(f"{path} holds a CRF, whose allowed (BIO) transitions follow from the "
                       f"tag names, but no {MODEL_FLAGS_NAME} with its labels is "
                       "beside it; put run_ner's model_flags.json of this model there")
    logger.warning("%s: no tag names (%s); the labels are written as LABEL_0 .. LABEL_%d",
                   path, source, num_labels - 1)
    return _placeholder_labels(num_labels), use_crf, flags
  if len(labels) != num_labels:
    raise ValueError(f"{path}: {source} names {len(labels)} labels, but the token head has "
                     f"{num_labels} outputs")
  return [str(label) for label in labels], use_crf, flags


def _beside(path, name):
  """`name` in a checkpoint's directory (a run's output dir keeps its config there)."""
  directory = path if os.path.isdir(path) else os.path.dirname(path)
  return os.path.join(directory, name)


def _config_for(fmt, path, albert_config_file):
  if albert_config_file:
    return AlbertConfig.from_json_file(albert_config_file)
  if fmt in FOREIGN_FORMATS:
    config = sources.read(path, fmt, with_arrays=False).config
    if config is None:
      raise ValueError(f"--albert_config_file is needed for --from={fmt}: {path} does not carry "
                       "the model's config (the albert_config.json of the model it was made from)")
    return AlbertConfig.from_dict(config)
  if fmt == "huggingface":
    return huggingface.config_from_huggingface(os.path.join(path, huggingface.CONFIG_FILE))
  candidate = _beside(path, CONFIG_NAME)
  if os.path.exists(candidate):
    return AlbertConfig.from_json_file(candidate)
  raise ValueError(f"--albert_config_file is needed for --from={fmt} (no {CONFIG_NAME} next to "
                   f"{path})")


def _check_format(fmt, path):
  """Refuses a source whose own names say it is not `fmt` (read as another format, a TF1
  checkpoint lost its head and the conversion still succeeded)."""
  try:
    found = checkpoints.source_format(path)
  except FileNotFoundError:
    if fmt != "huggingface":
      raise
    raise FileNotFoundError(f"{path} is not a Hugging Face directory (config.json and "
                            "model.safetensors)") from None
  if found != fmt:
    hint = (f"pass --from={found}" if found in INPUT_FORMATS else
            f"--from reads {', '.join(INPUT_FORMATS)}; fine-tune from it with "
            "--albert_hub_module_handle")
    raise ValueError(f"--from={fmt}, but {path} is {checkpoints.format_name(found)}: {hint}")


def _check_nothing_dropped(converted, path, requested):
  """Every weight of the source has a place in the model written, unless --head=encoder
  asked for the encoder alone."""
  unused = converted.report.unused
  if unused and requested != "encoder":
    raise ValueError(f"{path}: {len(unused)} weight(s) have no place in a {converted.head} model "
                     f"and would be dropped: {', '.join(unused[:5])}"
                     f"{' ...' if len(unused) > 5 else ''}; --head=encoder converts the "
                     "encoder alone")


def read(fmt, path, albert_config_file=None, head="auto", spm_model_file=None, vocab_file=None,
         do_lower_case=None):
  """Reads a checkpoint of format `fmt` into a fresh model; returns a `Converted`."""
  if fmt not in INPUT_FORMATS:
    raise ValueError(f"--from={fmt!r}: one of {', '.join(INPUT_FORMATS)}")
  path = os.fspath(path)
  _check_format(fmt, path)
  hf_values = None
  if fmt in FOREIGN_FORMATS:
    weights = sources.read(path, fmt)
    spm_model_file = spm_model_file or weights.spm_model_file
    vocab_file = vocab_file or weights.vocab_file
    if do_lower_case is None:
      do_lower_case = weights.do_lower_case
    if head == "auto" and weights.head:
      head = weights.head
  if fmt == "huggingface":
    hf_values = huggingface.read_json(os.path.join(path, huggingface.CONFIG_FILE))
    spm_model_file, vocab_file, do_lower_case = huggingface.tokenizer_defaults(
        path, spm_model_file, vocab_file, do_lower_case)
  config = _config_for(fmt, path, albert_config_file)
  requested = head
  head, num_labels = _detect_head(fmt, path, head, hf_values)
  labels, use_crf, flags = None, False, None
  if head == "token_classification":
    labels, use_crf, flags = _token_head_flags(fmt, path, num_labels, hf_values)
  model = build_model(config, head, num_labels, labels, use_crf)
  report = checkpoints.load_checkpoint(model, path)
  converted = Converted(model, config, head, report, num_labels, spm_model_file, vocab_file,
                        True if do_lower_case is None else bool(do_lower_case), labels, use_crf,
                        flags)
  _check_nothing_dropped(converted, path, requested)
  return converted


def _loaded_arrays(converted):
  """{TF1 name: ndarray} of the weights the source held (nothing freshly initialised)."""
  loaded = {v.ref() for v in converted.report.assigned}
  return {name: variable.numpy()
          for name, variable in tf1_names.tf1_variable_map(converted.model).items()
          if variable.ref() in loaded}


def _special_ids(spm_model_file, vocab_file):
  """pad/bos/eos ids for config.json: <pad>, [CLS], [SEP] of the vocabulary."""
  if spm_model_file:
    import sentencepiece as spm  # pylint: disable=g-import-not-at-top
    sp = spm.SentencePieceProcessor(model_file=spm_model_file)
    return {"pad_token_id": sp.piece_to_id("<pad>"), "bos_token_id": sp.piece_to_id("[CLS]"),
            "eos_token_id": sp.piece_to_id("[SEP]")}
  if vocab_file:
    with open(vocab_file, encoding="utf-8") as f:
      index = {line.rstrip("\n"): i for i, line in enumerate(f)}
    return {"pad_token_id": index.get("[PAD]", 0), "bos_token_id": index.get("[CLS]", 2),
            "eos_token_id": index.get("[SEP]", 3)}
  return None


def _write_huggingface(converted, directory):
  c = converted
  head = c.head
  if head == "pretraining" and not c.report.restored(
      c.model.sentence_order.trainable_variables):
    head = "masked_lm"  # no SOP weights in the source: AlbertForMaskedLM's layout
  huggingface.check_expressible(c.config, head)
  if c.config.inner_group_num > c.config.num_hidden_layers // c.config.num_hidden_groups:
    logger.warning("inner_group_num=%d is more than num_hidden_layers / num_hidden_groups: "
                   "transformers 4.x fails on such a model (its head-mask slicing); 5.x runs "
                   "it", c.config.inner_group_num)
  values = huggingface.config_to_huggingface(
      c.config, head, c.num_labels, _special_ids(c.spm_model_file, c.vocab_file), c.labels)
  arrays = huggingface.to_huggingface_names(_loaded_arrays(c), with_prefix=head != "encoder")
  huggingface.write_safetensors(arrays, os.path.join(directory, huggingface.WEIGHTS_FILE))
  files.write_json(os.path.join(directory, huggingface.CONFIG_FILE), values, sort_keys=True)
  tokenizer_files = huggingface.tokenizer_files(c.spm_model_file, c.vocab_file, c.do_lower_case,
                                                c.config.max_position_embeddings)
  if not tokenizer_files:
    logger.warning("no --spm_model_file or --vocab_file: no tokenizer files written")
  for name, data in tokenizer_files.items():
    files.write_bytes(os.path.join(directory, name), data)


def _write_model_flags(converted, directory):
  """A token classifier's model_flags.json, as run_ner writes it (NerTask.model_flags): its
  labels and CRF for a --do_predict run there, which checks the file against its own flags;
  the source's other flags (a native or TF1 source's) are kept."""
  if converted.head == "token_classification":
    flags = dict(converted.model_flags or {}, task_name="ner", labels=list(converted.labels),
                 use_crf=bool(converted.use_crf))
    files.write_json(os.path.join(directory, MODEL_FLAGS_NAME), flags, sort_keys=True)


def _copy_vocabulary(converted, directory):
  for source in (converted.spm_model_file, converted.vocab_file):
    if source:
      shutil.copyfile(source, os.path.join(directory, os.path.basename(source)))


def _write_tf1(converted, directory):
  checkpoints.save_tf1_checkpoint(converted.model, os.path.join(directory, "model.ckpt"),
                                  variables=converted.report.assigned)
  converted.config.to_json_file(os.path.join(directory, CONFIG_NAME))
  _write_model_flags(converted, directory)
  _copy_vocabulary(converted, directory)


def _write_native(converted, directory):
  if converted.report.missing:
    logger.warning("not in the source, written as initialised: %s",
                   ", ".join(converted.report.missing))
  manager = tf.train.CheckpointManager(checkpoints.native_checkpoint(converted.model),
                                       directory, max_to_keep=1)
  manager.save(checkpoint_number=0)
  converted.config.to_json_file(os.path.join(directory, CONFIG_NAME))
  _write_model_flags(converted, directory)
  _copy_vocabulary(converted, directory)


def _write_model_garden(converted, directory):
  from albert_tf.interop import model_garden  # pylint: disable=g-import-not-at-top
  model_garden.write(converted, directory)


_WRITERS = {"tf1": _write_tf1, "native": _write_native, "huggingface": _write_huggingface,
            "model_garden": _write_model_garden}


def write(converted, fmt, output_dir):
  """Writes `converted` in format `fmt` to `output_dir` atomically; returns output_dir.

  The files are written to a temporary sibling directory that is renamed into place, so an
  interrupted conversion leaves no half-written directory. An existing non-empty
  `output_dir` is refused (nothing is overwritten).
  """
  if fmt not in OUTPUT_FORMATS:
    raise ValueError(f"--to={fmt!r}: one of {', '.join(OUTPUT_FORMATS)}")
  output_dir = os.path.abspath(os.fspath(output_dir))
  if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or os.listdir(output_dir)):
    raise FileExistsError(f"--output_dir={output_dir} exists and is not empty; choose a new "
                          "directory")
  if fmt == "huggingface":  # refuse before writing anything
    huggingface.check_expressible(converted.config, converted.head)
    if converted.use_crf:
      raise ValueError("this token classifier has a CRF (run_ner --use_crf: "
                       f"{CRF_NAME} and its start / end scores), which transformers has no "
                       "counterpart for: AlbertForTokenClassification tags each token by its "
                       "own logits, so the CRF's transitions and its BIO-constrained Viterbi "
                       "decoding would be lost; --head=encoder converts the encoder alone, and "
                       "--to=native / --to=tf1 keep the CRF")
  with files.atomic_path(output_dir) as tmp:
    os.makedirs(tmp)
    _WRITERS[fmt](converted, tmp)
  return output_dir


def convert(from_format, to_format, source, output_dir, **read_options):
  """Reads `source` (format `from_format`) and writes it as `to_format` to `output_dir`."""
  converted = read(from_format, source, **read_options)
  write(converted, to_format, output_dir)
  logger.info("%s (%s head) -> %s %s", source, converted.head, to_format, output_dir)
  return converted



if __name__ == "__main__":  # documented as a command before the re-foldering (issue 42)
  import sys  # pylint: disable=g-import-not-at-top
  sys.exit("python -m albert_tf.interop.convert moved: run python -m albert_tf.cli.convert")
