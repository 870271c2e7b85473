"""What a fine-tuning job's starting point gives its settings: the config and tokenizer files
that a Hugging Face directory or another library's artifact carries, taken for the flags the
user left empty.

    values = start_defaults({"init_checkpoint": "albert_base_hf", "albert_config_file": None,
                             "spm_model_file": None, "vocab_file": None,
                             "do_lower_case": True})
    values["albert_config_file"]                 # "albert_base_hf/config.json"

One rule for every format, so it lives apart from each format's reader: `huggingface.py` says
which files a transformers directory holds, `sources.py` what a foreign artifact carries; this
module decides which of them stand in for a flag (the scripts' `script_flags.job_options`).
"""

import logging
import os

from albert_tf.interop import huggingface, sources

logger = logging.getLogger(__name__)


def start_defaults(values, do_lower_case_given=False):
  """A fine-tuning job's settings (`values`, by flag name) filled from its starting point: with
  init_checkpoint=<Hugging Face directory>, its config.json stands in for albert_config_file,
  and its tokenizer files for spm_model_file / vocab_file and do_lower_case (unless
  `do_lower_case_given`), where those are not given. Returns the filled values (a new dict);
  settings absent from `values` stay absent."""
  values = dict(values)
  # The scripts start from --albert_hub_module_handle before --init_checkpoint (finetuning.py).
  start = values.get("albert_hub_module_handle") or values.get("init_checkpoint")
  if not start:
    return values
  if not huggingface.is_huggingface_dir(start):
    return _foreign_start_defaults(values, start, do_lower_case_given)
  taken = []
  if "albert_config_file" in values and not values["albert_config_file"]:
    values["albert_config_file"] = os.path.join(start, huggingface.CONFIG_FILE)
    taken.append("--albert_config_file=" + values["albert_config_file"])
  if "spm_model_file" in values:
    found = huggingface.tokenizer_defaults(
        start, values["spm_model_file"], values.get("vocab_file"),
        values["do_lower_case"] if do_lower_case_given else None)
    for name, value in zip(("spm_model_file", "vocab_file", "do_lower_case"), found):
      if value is not None and value != values.get(name):
        values[name] = value
        taken.append(f"--{name}={value}")
  if taken:
    logger.info("From the Hugging Face directory %s: %s", start, " ".join(taken))
  return values


def _foreign_start_defaults(values, start, do_lower_case_given):
  """`start_defaults` for another library's artifact (sources.py): its config file and
  tokenizer, where it carries them and the flags are not given."""
  fmt = sources.detect(start)
  if fmt is None:
    return values
  weights = sources.read(start, fmt, with_arrays=False)
  found = {"albert_config_file": weights.config_file}
  if not values.get("spm_model_file") and not values.get("vocab_file"):
    found.update(spm_model_file=weights.spm_model_file, vocab_file=weights.vocab_file)
    if not do_lower_case_given:
      found["do_lower_case"] = weights.do_lower_case
  taken = []
  for name, value in found.items():
    if name in values and value is not None and value != values[name] and (
        name == "do_lower_case" or not values[name]):
      values[name] = value
      taken.append(f"--{name}={value}")
  if taken:
    logger.info("From %s: %s", start, " ".join(taken))
  return values
