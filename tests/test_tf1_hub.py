"""TF1 Hub modules of the original ALBERT (TF Hub google/albert_*/1-2, export_to_tfhub.py):
read by name, their own outputs reproduced, converted, and started from with
--albert_hub_module_handle as the original's run_glue.sh does.

The module is made here at a tiny size by tf1_hub_module.py (the original's graph and export
layout; tensorflow_hub 0.16 has no TF1 API left to make one) and run by tensorflow_hub's own
loader, `hub.load`, through its signatures.
"""

import json
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub

import reference_albert as ref
from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer, load_checkpoint
from albert_tf.cli import convert as convert_cli
from albert_tf.cli.runs import run_classifier
from albert_tf.interop import checkpoints, sources, starts, tfhub_tf1
from albert_tf.interop.checkpoints import CheckpointError
from albert_tf.interop.tf1_names import tf1_variable_map
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tasks.classification import ClassifierOptions
from conftest import ROOT, SHARED_DATA, adamw_step_bound, float32_atol
from tf1_hub_module import SPM_ASSET, write_module

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
CONFIG = json.loads((ROOT / "configs" / "tiny.json").read_text())
KEY = "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/key/kernel"


@pytest.fixture(scope="module")
def arrays():
  return ref.random_tf1_weights(CONFIG, heads=True, seed=4)


@pytest.fixture(scope="module")
def module(tmp_path_factory, arrays):
  """A v2-style module: its config and SentencePiece model in assets/, lower-casing."""
  return write_module(tmp_path_factory.mktemp("hub") / "albert_tiny_2", CONFIG, arrays, SPM)


def _inputs():
  rng = np.random.default_rng(7)
  mask = np.ones((3, 10), np.int32)
  mask[1, 6:] = 0
  mask[2, 3:] = 0
  ids = (rng.integers(5, CONFIG["vocab_size"], mask.shape) * mask).astype(np.int32)
  ids[:, 0] = 2
  types = ((np.arange(10)[None] >= [[5], [3], [1]]) * mask).astype(np.int32)
  positions = np.array([[1, 3, 4], [2, 5, 0], [1, 2, 0]], np.int32)
  return ids, mask, types, positions


def module_outputs(directory):
  """The module's own `tokens`, `mlm` and `sop` signatures, run by tensorflow_hub (no tags:
  the inference graph)."""
  ids, mask, types, positions = _inputs()
  signatures = hub.load(str(directory), tags=[]).signatures
  tokens = signatures["tokens"](input_ids=ids, input_mask=mask, segment_ids=types)
  mlm = signatures["mlm"](input_ids=ids, input_mask=mask, segment_ids=types,
                          mlm_positions=positions)
  sop = signatures["sop"](input_ids=ids, input_mask=mask, segment_ids=types)
  return {"sequence_output": tokens["sequence_output"].numpy(),
          "pooled_output": tokens["pooled_output"].numpy(),
          "mlm_logits": mlm["mlm_logits"].numpy().reshape(positions.shape + (-1,)),
          "sop_log_probs": sop["sop_log_probs"].numpy()}


@pytest.fixture(scope="module")
def theirs(module):
  return module_outputs(module)


def our_outputs(model):
  ids, mask, types, positions = _inputs()
  out = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
               "masked_lm_positions": positions}, training=False)
  return {"sequence_output": out["sequence_output"].numpy(),
          "pooled_output": out["pooled_output"].numpy(),
          "mlm_logits": out["mlm_logits"].numpy(),
          "sop_log_probs": tf.nn.log_softmax(out["sop_logits"]).numpy()}


def assert_same_outputs(got, want):
  # Each value ends a chain of L blocks of sums over I (and H) terms; the MLM logits add V.
  terms = CONFIG["num_hidden_layers"] * (CONFIG["intermediate_size"] + CONFIG["hidden_size"])
  for key, value in want.items():
    np.testing.assert_allclose(got[key], value, rtol=0, err_msg=key,
                               atol=float32_atol(value, terms + CONFIG["embedding_size"]))


def test_the_module_is_read_by_its_own_names_with_its_tokenizer_and_config(module, arrays):
  assert sources.detect(str(module)) == "tfhub_tf1"
  assert checkpoints.source_format(module) == "tfhub_tf1"
  weights = sources.read(str(module))
  assert set(weights.arrays) == set(arrays)  # encoder, cls/predictions, cls/seq_relationship
  for name, value in arrays.items():
    np.testing.assert_array_equal(weights.arrays[name], value, err_msg=name)
  # The SentencePiece model is the asset tokenization_info's vocab_file names.
  assert weights.spm_model_file == os.path.join(module, "assets", SPM_ASSET)
  assert weights.do_lower_case is True and weights.vocab_file is None
  assert weights.config == CONFIG
  assert weights.config_file == os.path.join(module, "assets", "albert_config.json")
  # Other SavedModels and checkpoint folders are not claimed.
  assert not tfhub_tf1.is_tf1_hub_module(os.path.join(module, "variables"))


def test_our_pretrainer_gives_the_modules_own_outputs_and_a_wrong_name_map_would_not(module,
                                                                                   theirs):
  model = AlbertPretrainer(AlbertConfig.from_dict(CONFIG))
  report = load_checkpoint(model, str(module))
  assert report.format == "tfhub_tf1" and not report.missing and not report.unused
  ours = our_outputs(model)
  assert_same_outputs(ours, theirs)
  # The comparison sees a swapped query/key: the outputs move far beyond the tolerance.
  names = tf1_variable_map(model)
  query = KEY.replace("/key/", "/query/")
  names[query].assign(names[KEY].numpy())
  with pytest.raises(AssertionError, match="sequence_output"):
    assert_same_outputs(our_outputs(model), theirs)


def test_it_converts_to_tf1_and_huggingface_with_its_config_and_tokenizer(module, theirs,
                                                                          tmp_path):
  for to in ("tf1", "huggingface"):
    out = tmp_path / to
    assert convert_cli.main(["--from=tfhub_tf1", f"--to={to}", f"--checkpoint={module}",
                             f"--output_dir={out}"]) == 0
    assert (out / ("spiece.model" if to == "huggingface" else SPM_ASSET)).read_bytes() == (
        SPM.read_bytes())
    model = AlbertPretrainer(AlbertConfig.from_dict(CONFIG))
    report = load_checkpoint(model, str(out))
    assert not report.missing
    assert_same_outputs(our_outputs(model), theirs)
  tokenizer = json.loads((tmp_path / "huggingface" / "tokenizer_config.json").read_text())
  assert tokenizer["do_lower_case"] is True


def test_a_v1_module_carries_no_config_and_its_casing_is_read_from_the_graph(arrays, tmp_path):
  # v1 modules had only 30k-clean.model in assets; this one also says do_lower_case=False.
  module = write_module(tmp_path / "albert_tiny_1", CONFIG, arrays, SPM, do_lower_case=False,
                        with_config=False)
  weights = sources.read(str(module), with_arrays=False)
  assert weights.config is None and weights.config_file is None and not weights.arrays
  assert weights.do_lower_case is False
  assert weights.spm_model_file == os.path.join(module, "assets", SPM_ASSET)
  with pytest.raises(ValueError, match="--albert_config_file is needed for --from=tfhub_tf1"):
    from albert_tf.interop import convert  # pylint: disable=g-import-not-at-top
    convert.read("tfhub_tf1", module)
  assert convert_cli.main(["--from=tfhub_tf1", "--to=tf1", f"--checkpoint={module}",
                           f"--output_dir={tmp_path / 'none'}"]) == 1
  assert not (tmp_path / "none").exists()
  # An albert_config.json put beside tfhub_module.pb is the module's config.
  shutil.copy(ROOT / "configs" / "tiny.json", module / "albert_config.json")
  assert sources.read(str(module), with_arrays=False).config == CONFIG


def test_run_classifier_starts_from_the_module_with_albert_hub_module_handle(module, arrays,
                                                                            tmp_path, caplog):
  csv = tmp_path / "csv"
  csv.mkdir()
  rows = ["review,stars"] + [f"{'great fun' if i % 2 else 'dull and slow'} take {i},{i % 2}"
                             for i in range(16)]
  (csv / "train.csv").write_text("\n".join(rows) + "\n")
  # As run_glue.sh: the module handle, no --albert_config_file, no --init_checkpoint; the
  # module's config and SentencePiece model are taken (the flag handling's start_defaults).
  values = starts.start_defaults(dict(
      albert_hub_module_handle=str(module), init_checkpoint="", albert_config_file=None,
      spm_model_file=None, vocab_file=None, do_lower_case=True))
  assert values["albert_config_file"] == os.path.join(module, "assets", "albert_config.json")
  assert values["spm_model_file"] == os.path.join(module, "assets", SPM_ASSET)
  options = ClassifierOptions(
      task_name="csv", data_dir=str(csv), output_dir=str(tmp_path / "out"), do_train=True,
      max_seq_length=16, train_batch_size=8, train_step=2, save_checkpoints_steps=2,
      iterations_per_loop=2, log_every_seconds=0, learning_rate=1e-5,
      csv_options=dict(text_a_column="review", label_column="stars"), **values)
  with caplog.at_level(logging.INFO):
    run_classifier(options)
  assert f"from tfhub_tf1 checkpoint {module}" in caplog.text
  # Two small steps later the encoder is still the module's, the head is new.
  trained = AlbertClassifier(AlbertConfig.from_dict(CONFIG), num_labels=2)
  load_checkpoint(trained, str(tmp_path / "out" / "ckpt-2"))
  names = tf1_variable_map(trained)
  for name in ("bert/pooler/dense/kernel", KEY):  # 2 steps at lr 1e-5 at most
    np.testing.assert_allclose(names[name].numpy(), arrays[name], rtol=0,
                               atol=adamw_step_bound(1e-5, 2, arrays[name]), err_msg=name)


# --- bad modules ------------------------------------------------------------------------------
def _copy(module, tmp_path):
  copy = tmp_path / "module"
  shutil.copytree(module, copy)
  return copy


def _rewrite_variables(module, arrays):
  for f in (module / "variables").iterdir():
    f.unlink()
  ref.write_tf1_checkpoint(str(module / "variables" / "variables"), arrays,
                           write_state_file=False)


def test_variables_saved_with_hub_modules_module_prefix_are_read_by_the_same_names(
    module, arrays, tmp_path):
  prefixed = _copy(module, tmp_path)
  ref.write_tf1_checkpoint(str(prefixed / "variables" / "variables"), arrays, hub_prefix=True,
                           write_state_file=False)
  weights = sources.read(str(prefixed))
  assert set(weights.arrays) == set(arrays)
  np.testing.assert_array_equal(weights.arrays[KEY], arrays[KEY])


def test_a_module_missing_a_variable_is_named_and_nothing_is_loaded_or_written(module, arrays,
                                                                             tmp_path):
  broken = _copy(module, tmp_path)
  _rewrite_variables(broken, {n: v for n, v in arrays.items() if n != KEY})
  prefix = os.path.join(broken, "variables", "variables")
  with pytest.raises(CheckpointError, match=f"{prefix} lacks the variable '{KEY}'"):
    sources.read(str(broken))
  encoder = AlbertEncoder(AlbertConfig.from_dict(CONFIG))
  before = [v.numpy() for v in encoder.weights]
  with pytest.raises(CheckpointError, match=KEY):
    load_checkpoint(encoder, str(broken))
  for value, variable in zip(before, encoder.weights):
    np.testing.assert_array_equal(variable.numpy(), value)
  out = tmp_path / "out"
  assert convert_cli.main(["--from=tfhub_tf1", "--to=huggingface", f"--checkpoint={broken}",
                           f"--output_dir={out}"]) == 1
  assert not out.exists()


def test_shape_mismatches_are_named_with_the_file_and_the_variable(module, arrays, tmp_path):
  # The variables disagree with the module's own graph.
  broken = _copy(module, tmp_path)
  _rewrite_variables(broken, dict(arrays, **{KEY: arrays[KEY][:, :8]}))
  with pytest.raises(CheckpointError, match=rf"variable '{KEY}' is \[32, 8\] in "
                     rf"{broken}/variables/variables but \[32, 32\] in the module's graph"):
    sources.read(str(broken))
  # The module disagrees with the config the model is built from.
  wide = tmp_path / "wide.json"
  wide.write_text(json.dumps(dict(CONFIG, hidden_size=48, num_attention_heads=4)))
  with pytest.raises(CheckpointError, match=rf"shape mismatch: checkpoint variable 'bert/[^']+' "
                     rf"\[.*\] vs model variable .*\(checkpoint {module}\)"):
    load_checkpoint(AlbertEncoder(AlbertConfig.from_json_file(wide)), str(module))
  out = tmp_path / "out"
  assert convert_cli.main(["--from=tfhub_tf1", "--to=tf1", f"--checkpoint={module}",
                           f"--albert_config_file={wide}", f"--output_dir={out}"]) == 1
  assert not out.exists()
