"""keras-hub presets (albert_tf/interop/keras_hub.py): read without keras-hub, compared with
keras-hub's own outputs (keras-hub is in requirements.txt), converted, fine-tuned from, refused.

Two kinds of presets: `layout_preset` writes a preset as Keras 3 lays it out (the h5 paths and
shapes of keras-hub 0.32's `save_to_preset`, written here with h5py, with random values), so
the reader, the scripts and the refusals are tested as a user without keras-hub has them; the
`keras_hub_presets` tests
build presets with keras-hub itself and compare our model's outputs with keras-hub's.
"""

import json
import os
import re
import shutil

import h5py
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, load_checkpoint
from albert_tf.export.bundle import export_bundle
from albert_tf.interop import checkpoints, convert, sources, starts
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.tasks.classification import ClassifierOptions
from albert_tf.tokenization.tokenizer import FullTokenizer
from conftest import SHARED_DATA, float32_atol

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
VOCAB, EMB, HIDDEN, HEADS, INTER, MAX_LEN = 30000, 16, 32, 4, 64, 64
LAYERS, GROUPS, INNER = 4, 2, 2
KERAS_CONFIG = dict(vocabulary_size=VOCAB, num_layers=LAYERS, num_heads=HEADS,
                    num_groups=GROUPS, num_inner_repetitions=INNER, embedding_dim=EMB,
                    hidden_dim=HIDDEN, intermediate_dim=INTER, dropout=0.0,
                    max_sequence_length=MAX_LEN, num_segments=2)
TEXTS = ["Hello World!", "ALBERT is A Lite BERT.", "the quick brown fox jumps over 2 dogs"]


def _inputs(batch=2, seq=9):
  rng = np.random.default_rng(3)
  mask = np.ones((batch, seq), np.int32)
  mask[1, 6:] = 0
  ids = (rng.integers(5, VOCAB, (batch, seq)) * mask).astype(np.int32)
  segments = ((np.arange(seq)[None] >= 4) * mask).astype(np.int32)
  return ids, segments, mask


def _ours(model):
  ids, segments, mask = _inputs()
  return model({"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                "input_type_ids": tf.constant(segments)})


def _close(ours, theirs, terms=HIDDEN):
  """Equal to float32 rounding: two graphs (and kernel libraries) may sum each `terms`-long
  dot product in other orders, through LayerNorms that rescale the error; see
  conftest.float32_atol."""
  theirs = np.asarray(theirs)
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=0,
                             atol=float32_atol(theirs, terms))


# ---------------------------------------------------------------------------------------------
# A preset written in Keras 3's layout (no keras-hub needed)

def _backbone_layout():
  """{(layer key, keras-hub layer name): {sub path: [shapes of vars/0, vars/1, ...]}}."""
  head_dim = HIDDEN // HEADS
  layout = {("reversible_embedding", "token_embedding"): {"": [[VOCAB, EMB]]},
            ("position_embedding", "position_embedding"): {"": [[MAX_LEN, EMB]]},
            ("embedding", "segment_embedding"): {"": [[2, EMB]]},
            ("layer_normalization", "embeddings_layer_norm"): {"": [[EMB], [EMB]]},
            ("dense", "embedding_projection"): {"": [[EMB, HIDDEN], [HIDDEN]]},
            ("dense_1", "pooled_dense"): {"": [[HIDDEN, HIDDEN], [HIDDEN]]},
            ("add", "embeddings_add"): {"": []}}
  for n in range(GROUPS * INNER):
    key = "transformer_encoder" + (f"_{n}" if n else "")
    attention = "_self_attention_layer/"
    subs = {attention + d: [[HIDDEN, HEADS, head_dim], [HEADS, head_dim]]
            for d in ("query_dense", "key_dense", "value_dense")}
    subs[attention + "output_dense"] = [[HEADS, head_dim, HIDDEN], [HIDDEN]]
    subs["_self_attention_layer_norm"] = [[HIDDEN], [HIDDEN]]
    subs["_feedforward_intermediate_dense"] = [[HIDDEN, INTER], [INTER]]
    subs["_feedforward_output_dense"] = [[INTER, HIDDEN], [HIDDEN]]
    subs["_feedforward_layer_norm"] = [[HIDDEN], [HIDDEN]]
    layout[(key, f"group_{n // INNER}_inner_layer_{n % INNER}")] = subs
  return layout


def _write_h5(path, layout, seed, names=True):
  rng = np.random.default_rng(seed)
  with h5py.File(path, "w") as h5:
    for (key, name), subs in layout.items():
      for sub, shapes in subs.items():
        group = h5.create_group("/".join(p for p in ("layers", key, sub, "vars") if p))
        if names and not sub:
          group.attrs["name"] = name
        for i, shape in enumerate(shapes):
          group.create_dataset(str(i), data=rng.normal(size=shape).astype(np.float32) * 0.2)


def _serialized(module, class_name, config):
  return {"module": f"keras_hub.src.models.{module}", "class_name": class_name,
          "config": config, "registered_name": f"keras_hub>{class_name}"}


def layout_preset(directory, num_classes=None, names=True, seed=0):
  os.makedirs(os.path.join(directory, "assets", "tokenizer"))
  with open(os.path.join(directory, "config.json"), "w") as f:
    json.dump(_serialized("albert.albert_backbone", "AlbertBackbone", KERAS_CONFIG), f)
  _write_h5(os.path.join(directory, "model.weights.h5"), _backbone_layout(), seed, names)
  shutil.copy(SPM, os.path.join(directory, "assets", "tokenizer", "vocabulary.spm"))
  if num_classes:
    task = _serialized("albert.albert_text_classifier", "AlbertTextClassifier",
                       dict(num_classes=num_classes, activation="linear", dropout=0.1))
    with open(os.path.join(directory, "task.json"), "w") as f:
      json.dump(task, f)
    _write_h5(os.path.join(directory, "task.weights.h5"),
              {("dense", "logits"): {"": [[HIDDEN, num_classes], [num_classes]]},
               ("dropout", "output_dropout"): {"": []}}, seed + 1, names)
  return str(directory)


@pytest.fixture(scope="module")
def classifier_preset(tmp_path_factory):
  return layout_preset(tmp_path_factory.mktemp("kh") / "clf", num_classes=3)


def test_detection_claims_presets_only(classifier_preset, tmp_path):
  assert sources.detect(classifier_preset) == "keras_hub"
  assert checkpoints.source_format(classifier_preset) == "keras_hub"
  hf = tmp_path / "hf"  # a Hugging Face directory: config.json with model_type
  hf.mkdir()
  (hf / "config.json").write_text(json.dumps({"model_type": "albert", "vocab_size": 10}))
  (hf / "model.weights.h5").write_bytes(b"")
  assert sources.detect(str(hf)) is None
  assert sources.detect(str(tmp_path)) is None


def test_reader_maps_the_h5_to_the_original_names(classifier_preset, tmp_path):
  weights = sources.read(classifier_preset)
  assert weights.head == "classification" and weights.do_lower_case is False
  assert weights.spm_model_file.endswith(os.path.join("assets", "tokenizer", "vocabulary.spm"))
  assert weights.config_file == os.path.join(classifier_preset, "config.json")
  with h5py.File(os.path.join(classifier_preset, "model.weights.h5")) as h5:
    query = h5["layers/transformer_encoder_3/_self_attention_layer/query_dense/vars/0"][()]
    out = h5["layers/transformer_encoder_3/_self_attention_layer/output_dense/vars/0"][()]
  scope = "bert/encoder/transformer/group_1/inner_group_1/attention_1/"
  # Heads side by side: column h * head_dim + d of the original's kernel is head h's d.
  np.testing.assert_array_equal(weights.arrays[scope + "self/query/kernel"][:, 9],
                                query[:, 1, 1])
  np.testing.assert_array_equal(weights.arrays[scope + "output/dense/kernel"][9], out[1, 1])
  with h5py.File(os.path.join(classifier_preset, "task.weights.h5")) as h5:
    np.testing.assert_array_equal(weights.arrays["output_weights"],
                                  h5["layers/dense/vars/0"][()].T)
  # Files written without the layers' name attributes (older Keras) read the same.
  unnamed = sources.read(layout_preset(tmp_path / "unnamed", num_classes=3, names=False))
  assert sorted(unnamed.arrays) == sorted(weights.arrays)
  for name, value in weights.arrays.items():
    np.testing.assert_array_equal(unnamed.arrays[name], value, err_msg=name)
  # The preset's config.json is an ALBERT config file.
  config = AlbertConfig.from_json_file(weights.config_file)
  assert (config.hidden_size, config.num_hidden_groups, config.inner_group_num,
          config.hidden_act) == (HIDDEN, GROUPS, INNER, "gelu")


@pytest.fixture(scope="module")
def converted(classifier_preset, tmp_path_factory):
  """The classifier preset converted to tf1 and huggingface, and our model loaded from it."""
  out = tmp_path_factory.mktemp("converted")
  model = AlbertClassifier(AlbertConfig.from_json_file(
      os.path.join(classifier_preset, "config.json")), 3)
  load_checkpoint(model, classifier_preset)
  for fmt in ("tf1", "huggingface"):
    convert.convert("keras_hub", fmt, classifier_preset, str(out / fmt))
  return model, out


def test_conversions_to_tf1_and_huggingface_keep_the_outputs(converted):
  model, out = converted
  expected = _ours(model).numpy()
  config = AlbertConfig.from_json_file(out / "huggingface" / "config.json")
  for source in (checkpoints.resolve_checkpoint_path(str(out / "tf1")), str(out / "huggingface")):
    again = AlbertClassifier(config, 3)
    assert load_checkpoint(again, source).loaded
    np.testing.assert_array_equal(_ours(again).numpy(), expected, err_msg=source)
  # keras-hub's tokenizer does not lower-case: the Hugging Face tokenizer files say so.
  hf_tokenizer = json.loads((out / "huggingface" / "tokenizer_config.json").read_text())
  assert hf_tokenizer["do_lower_case"] is False


def test_run_classifier_starts_from_a_preset_alone(classifier_preset, tmp_path):
  from albert_tf.cli.runs import run_classifier  # pylint: disable=g-import-not-at-top
  data = tmp_path / "csv"
  data.mkdir()
  rows = ["review,stars"] + [f"{'great fun' if i % 2 else 'dull'} take {i},{i % 2}"
                             for i in range(16)]
  for split in ("train", "dev", "test"):
    (data / f"{split}.csv").write_text("\n".join(rows) + "\n")
  backbone_only = layout_preset(tmp_path / "backbone")
  values = starts.start_defaults(dict(
      init_checkpoint=backbone_only, albert_config_file=None, spm_model_file=None,
      vocab_file=None, do_lower_case=True))
  assert values["albert_config_file"] == os.path.join(backbone_only, "config.json")
  assert values["spm_model_file"].endswith("vocabulary.spm")
  assert values["do_lower_case"] is False
  run_classifier(ClassifierOptions(
      task_name="csv", data_dir=str(data), output_dir=str(tmp_path / "out"), max_seq_length=16,
      train_batch_size=8, train_step=2, save_checkpoints_steps=2, iterations_per_loop=2,
      log_every_seconds=0, do_train=True, csv_options=dict(text_a_column="review",
                                                           label_column="stars"), **values))
  reader = tf.train.load_checkpoint(str(tmp_path / "out" / "ckpt-2"))
  assert reader.has_tensor("head/output_weights/.ATTRIBUTES/VARIABLE_VALUE")


def test_another_model_and_mismatched_shapes_are_refused_by_name(classifier_preset, tmp_path):
  bert = tmp_path / "bert"
  shutil.copytree(classifier_preset, bert)
  (bert / "config.json").write_text(json.dumps(_serialized(
      "bert.bert_backbone", "BertBackbone", dict(vocabulary_size=10, num_layers=2))))
  assert sources.detect(str(bert)) == "keras_hub"
  with pytest.raises(ValueError, match=r"bert/config\.json.*BertBackbone"):
    convert.convert("keras_hub", "tf1", str(bert), str(tmp_path / "out_bert"))
  with pytest.raises(ValueError, match=r"config\.json.*BertBackbone"):
    AlbertConfig.from_json_file(bert / "config.json")
  wrong = tmp_path / "wrong"
  shutil.copytree(classifier_preset, wrong)
  with h5py.File(wrong / "model.weights.h5", "a") as h5:
    del h5["layers/transformer_encoder_2/_feedforward_output_dense/vars/0"]
    h5["layers/transformer_encoder_2/_feedforward_output_dense/vars/0"] = np.zeros(
        [INTER + 1, HIDDEN], np.float32)
  with pytest.raises(checkpoints.CheckpointError,
                     match=r"wrong/model\.weights\.h5.*transformer_encoder_2/"
                           r"_feedforward_output_dense/vars/0.*group_1/inner_group_0/ffn_1/"
                           r"intermediate/output/dense/kernel"):
    convert.convert("keras_hub", "huggingface", str(wrong), str(tmp_path / "out_wrong"))
  with pytest.raises(checkpoints.CheckpointError, match=r"wrong/model\.weights\.h5"):
    load_checkpoint(AlbertEncoder(AlbertConfig.from_json_file(wrong / "config.json")),
                    str(wrong))
  assert not any(p.name.startswith("out_") for p in tmp_path.iterdir())


def test_an_incomplete_or_damaged_preset_is_one_line_naming_the_file_and_the_fix(
    classifier_preset, tmp_path, capsys):
  """Was "no checkpoint found in directory": a preset without its weights or its config, or
  with a config.json that is not JSON, is still a preset, and the line says what it lacks."""
  from albert_tf.cli import convert as cli  # pylint: disable=g-import-not-at-top
  fix = r"download the whole preset again .* and pass its folder"
  cases = {"no_weights": (lambda p: os.remove(p / "model.weights.h5"),
                          r"no_weights is a keras-hub preset without model\.weights\.h5 "
                          r"\(its weights\): "),
           "no_config": (lambda p: os.remove(p / "config.json"),
                         r"no_config looks like a keras-hub preset but has no config\.json "
                         r"\(the backbone's config\): "),
           "bad_config": (lambda p: (p / "config.json").write_text('{"module": "keras_hub'),
                          r"bad_config/config\.json: not valid JSON \(line 1: .*\): the "
                          r"keras-hub preset's config is damaged; ")}
  config = AlbertConfig.from_json_file(os.path.join(classifier_preset, "config.json"))
  for case, (damage, message) in cases.items():
    preset = tmp_path / case
    shutil.copytree(classifier_preset, preset)
    damage(preset)
    assert sources.detect(str(preset)) == "keras_hub", case
    with pytest.raises(checkpoints.CheckpointError, match=message + fix):
      load_checkpoint(AlbertClassifier(config, 3), str(preset))
    with pytest.raises(ValueError, match=message + fix):  # run_classifier's start
      starts.start_defaults(dict(init_checkpoint=str(preset), albert_config_file=None,
                                      spm_model_file=None, vocab_file=None, do_lower_case=True))
    assert cli.main(["--from=keras_hub", "--to=tf1", f"--input_dir={preset}",
                     f"--output_dir={tmp_path / 'out'}"]) == 1
    error = capsys.readouterr().err
    assert re.search(message + fix, error) and error.count("\n") == 1, error
  assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Against keras-hub itself


@pytest.fixture(scope="module")
def keras_hub_presets(tmp_path_factory):
  """A backbone, a text classifier (with its tokenizer) and a masked LM, as keras-hub's
  save_to_preset writes them, with every weight random (biases and betas too)."""
  import keras  # pylint: disable=g-import-not-at-top
  import keras_hub  # pylint: disable=g-import-not-at-top  (in requirements.txt: never skipped)
  keras.utils.set_random_seed(1)
  backbone = keras_hub.models.AlbertBackbone(**KERAS_CONFIG)
  tokenizer = keras_hub.models.AlbertTokenizer(proto=str(SPM))
  preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer,
                                                                   sequence_length=16)
  classifier = keras_hub.models.AlbertTextClassifier(backbone, 3, preprocessor=preprocessor)
  masked_lm = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=None)
  ids, _, _ = _inputs()
  masked_lm({"token_ids": ids, "segment_ids": ids * 0, "padding_mask": ids * 0 + 1,
             "mask_positions": np.zeros_like(ids[:, :3])})
  rng = np.random.default_rng(7)
  for model in (classifier, masked_lm):
    for variable in model.weights:
      value = rng.normal(size=variable.shape) * 0.2 + ("gamma" in variable.path)
      variable.assign(value.astype(np.float32))
  root = tmp_path_factory.mktemp("keras_hub")
  for name, model in (("backbone", backbone), ("classifier", classifier),
                      ("masked_lm", masked_lm)):
    model.save_to_preset(str(root / name))
  return keras_hub, backbone, classifier, masked_lm, root


def _theirs_inputs():
  ids, segments, mask = _inputs()
  return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


def test_backbone_outputs_equal_keras_hubs(keras_hub_presets, tmp_path):
  _, backbone, _, _, root = keras_hub_presets
  theirs = backbone(_theirs_inputs())
  preset = str(root / "backbone")
  encoder = AlbertEncoder(AlbertConfig.from_json_file(os.path.join(preset, "config.json")))
  report = load_checkpoint(encoder, preset)
  assert report.format == "keras_hub" and not report.missing
  ours = _ours(encoder)
  for key in ("sequence_output", "pooled_output"):
    _close(ours[key], theirs[key])
  # export_savedmodel.py takes the preset as its --checkpoint (and its config.json): the
  # exported encoder answers as keras-hub does.
  paths = export_bundle(os.path.join(preset, "config.json"), preset, str(tmp_path / "bundle"),
                        max_seq_length=16)
  ids, segments, mask = _inputs()
  served = tf.saved_model.load(paths["encoder"]).signatures["serving_default"](
      input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
      input_type_ids=tf.constant(segments))
  for key in ("sequence_output", "pooled_output"):
    _close(served[key], theirs[key])
  # A wrong name map is caught: the same preset with query and key swapped.
  swapped = tmp_path / "swapped"
  shutil.copytree(preset, swapped)
  with h5py.File(swapped / "model.weights.h5", "a") as h5:
    attention = "layers/transformer_encoder_1/_self_attention_layer/"
    query = h5[attention + "query_dense/vars/0"][()]
    h5[attention + "query_dense/vars/0"][...] = h5[attention + "key_dense/vars/0"][()]
    h5[attention + "key_dense/vars/0"][...] = query
  load_checkpoint(encoder, str(swapped))
  with pytest.raises(AssertionError):
    _close(_ours(encoder)["sequence_output"], theirs["sequence_output"])


def test_classifier_logits_equal_keras_hubs(keras_hub_presets):
  _, _, classifier, _, root = keras_hub_presets
  preset = str(root / "classifier")
  model = AlbertClassifier(AlbertConfig.from_json_file(os.path.join(preset, "config.json")), 3)
  assert load_checkpoint(model, preset).restored(model.head.trainable_variables)
  _close(_ours(model), classifier(_theirs_inputs()))


def test_masked_lm_logits_equal_keras_hubs_at_the_originals_epsilon(keras_hub_presets):
  _, _, _, masked_lm, root = keras_hub_presets
  positions = np.array([[1, 3, 5], [0, 2, 4]], np.int32)
  head_norm = masked_lm.get_layer("mlm_head")._intermediate_layer_norm
  assert head_norm.epsilon == 1e-5  # keras-hub's; the original's is 1e-12
  head_norm.epsilon = 1e-12
  try:
    theirs = masked_lm(dict(_theirs_inputs(), mask_positions=positions))
  finally:
    head_norm.epsilon = 1e-5
  preset = str(root / "masked_lm")
  assert sources.read(preset).head == "pretraining"
  model = AlbertPretrainer(AlbertConfig.from_json_file(os.path.join(preset, "config.json")))
  report = load_checkpoint(model, preset)
  assert report.restored(model.masked_lm.trainable_variables)
  ids, segments, mask = _inputs()
  ours = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments,
                "masked_lm_positions": positions})
  _close(ours["mlm_logits"], theirs, terms=EMB + HIDDEN)


def test_tokenizer_ids_equal_keras_hubs_without_lower_casing(keras_hub_presets):
  keras_hub, _, _, _, root = keras_hub_presets
  preset = str(root / "classifier")
  theirs = keras_hub.models.AlbertTokenizer.from_preset(preset)
  weights = sources.read(preset, with_arrays=False)
  ours = FullTokenizer(spm_model_file=weights.spm_model_file,
                       do_lower_case=weights.do_lower_case)
  for text in TEXTS:
    assert ours.convert_tokens_to_ids(ours.tokenize(text)) == (
        np.asarray(theirs(text)).tolist()), text


def test_our_huggingface_directory_loads_in_keras_hubs_from_preset(keras_hub_presets,
                                                                  converted):
  """keras-hub reads a transformers directory with its `albert.` names: ours with a head
  (here AlbertForSequenceClassification's); an encoder-only one has AlbertModel's bare names,
  which keras-hub 0.32 does not look for."""
  keras_hub = keras_hub_presets[0]
  model, out = converted
  hf = str(out / "huggingface")
  theirs = keras_hub.models.AlbertBackbone.from_preset(hf)(_theirs_inputs())
  ours = _ours(model.encoder)
  for key in ("sequence_output", "pooled_output"):
    _close(ours[key], theirs[key])
  tokenizer = keras_hub.models.AlbertTokenizer.from_preset(hf)
  spm = FullTokenizer(spm_model_file=str(SPM), do_lower_case=False)
  for text in TEXTS:
    assert np.asarray(tokenizer(text)).tolist() == spm.convert_tokens_to_ids(spm.tokenize(text))


def test_the_layout_preset_is_keras_hubs_layout(keras_hub_presets, classifier_preset):
  """The keras-free tests above stand on `layout_preset`: its h5 files hold exactly the
  variables (paths, shapes) and layer names of keras-hub's own save_to_preset."""
  root = keras_hub_presets[-1]

  def variables(path):
    found = {}
    with h5py.File(path) as h5:
      h5.visititems(lambda name, obj: found.__setitem__(
          name, list(obj.shape) if isinstance(obj, h5py.Dataset) else obj.attrs.get("name")))
    return {k: v for k, v in found.items() if isinstance(v, list) or k.count("/") == 2}

  def without_names(found):  # the `vars` groups' name attributes: only keras 3.15 writes them
    return {k: v for k, v in found.items() if isinstance(v, list)}

  for name in ("model.weights.h5", "task.weights.h5"):
    theirs = variables(root / "classifier" / name)
    ours = variables(os.path.join(classifier_preset, name))
    assert without_names(ours) == {k: v for k, v in without_names(theirs).items()
                                   if not k.startswith("optimizer")}, name
    for key, value in ours.items():
      if not isinstance(value, list) and value is not None:
        assert theirs[key] == value, key
