"""Model Garden TF2 checkpoints and TF Hub TF2 SavedModels as starting points, and
`convert --to=model_garden` (albert_tf/interop/model_garden.py, tfhub.py).

Every artifact is made here by tf-models-official itself, at tiny sizes: the checkpoints by
`official/nlp/tools/tf2_albert_encoder_checkpoint_converter.py` (encoder and pretrainer) and
`BertPretrainerV2.checkpoint_items`, the SavedModels by `export_tfhub_lib` (encoder with its
`mlm`, a BERT encoder, the preprocessing companion). Our models loaded from them must give
Model Garden's own outputs on the same inputs."""

import importlib
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf import AlbertConfig, AlbertPretrainer, load_checkpoint, save_tf1_checkpoint
from albert_tf.cli.runs import run_classifier
from albert_tf.config import CONFIG_NAME
from albert_tf.export.encoder import export_encoder
from albert_tf.interop import checkpoints, convert, huggingface, model_garden, sources, starts
from albert_tf.interop.checkpoints import CheckpointError, native_checkpoint
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.tasks.classification import ClassificationTask, ClassifierOptions
from albert_tf.tokenization import FullTokenizer
from albert_tf.training.run import Run
from albert_tf.tokenization.tokenizer import preprocess_text
from albert_tf.tokenization.in_graph import InGraphTokenizer
from conftest import ROOT, SHARED_DATA, adamw_step_bound, encoder_inputs, float32_atol
from conftest import randomised as _randomised

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
QUERY = "transformer/self_attention/query/kernel"
KEY = "transformer/self_attention/key/kernel"


def _inputs(vocab_size, batch=2, seq=9):
  return dict(encoder_inputs(vocab_size, batch, seq, seed=5, lowest_id=5),
              masked_lm_positions=tf.constant([[1, 3, 5], [0, 2, 4]], tf.int32))


def _encoder_inputs(inputs):
  return {k: v for k, v in inputs.items() if k != "masked_lm_positions"}


# tiny.json's longest chain of additions behind an output: the E-term embedding projection,
# per layer a sum over I and one over H, then the pooler's (or the MLM transform's) H and the
# logits' E.
TERMS = 16 + 2 * (64 + 32) + 32 + 16


def assert_close(ours, theirs):
  """Equal to float32 rounding of TERMS additions at the values' scale (two implementations
  sum in their own orders)."""
  ours, theirs = np.asarray(ours), np.asarray(theirs)
  assert ours.shape == theirs.shape
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=float32_atol(theirs, TERMS))


def _ours(model, inputs):
  """Our outputs: sequence, pooled (and mlm_logits for a pretrainer)."""
  if isinstance(model, AlbertEncoder):
    return model(_encoder_inputs(inputs), training=False)
  return model(inputs, training=False)


def _tool():
  """Model Garden's converter tool (imported when needed: it defines absl flags)."""
  return importlib.import_module("official.nlp.tools.tf2_albert_encoder_checkpoint_converter")


def _mg_config(config):
  """Model Garden's legacy AlbertConfig (what its converter tool reads) of ours."""
  from official.legacy.albert import configs  # pylint: disable=g-import-not-at-top
  return configs.AlbertConfig.from_dict(config.to_dict())


@pytest.fixture(scope="module")
def config():
  return AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(num_attention_heads=2)


@pytest.fixture(scope="module")
def inputs(config):
  return _inputs(config.vocab_size)


@pytest.fixture(scope="module")
def garden(config, inputs, tmp_path_factory):
  """Model Garden's artifacts and its own outputs on `inputs`.

  A TF1 checkpoint of random weights goes through Model Garden's converter tool (encoder and
  pretrainer checkpoints); the restored pretrainer is saved as `checkpoint_items` and exported
  by export_tfhub with its mlm."""
  from official.nlp.configs import encoders  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import export_tfhub_lib  # pylint: disable=g-import-not-at-top
  tool = _tool()
  root = tmp_path_factory.mktemp("garden")
  tf1 = save_tf1_checkpoint(_randomised(AlbertPretrainer(config), 7),
                            str(root / "tf1" / "model.ckpt"))
  mg_config = _mg_config(config)
  found = {"config": config}
  for kind in ("encoder", "pretrainer"):
    (root / kind).mkdir()  # the tool writes into an existing folder
    tool.convert_checkpoint(mg_config, str(root / kind / "ckpt"), tf1, "encoder",
                            converted_model=kind)
    found[kind] = str(root / kind)
  encoder = tool._create_albert_model(mg_config)  # pylint: disable=protected-access
  tf.train.Checkpoint(encoder=encoder).restore(
      tf.train.latest_checkpoint(found["encoder"])).assert_existing_objects_matched()
  sequence, pooled = encoder([inputs[k] for k in ("input_word_ids", "input_mask",
                                                  "input_type_ids")], training=False)
  found["encoder_outputs"] = {"sequence_output": sequence, "pooled_output": pooled}
  pretrainer = tool._create_pretrainer_model(mg_config)  # pylint: disable=protected-access
  tf.train.Checkpoint(encoder=pretrainer).restore(
      tf.train.latest_checkpoint(found["pretrainer"])).assert_existing_objects_matched()
  found["pretrainer_outputs"] = pretrainer(inputs, training=False)
  found["items"] = tf.train.Checkpoint(**pretrainer.checkpoint_items).save(
      str(root / "items" / "ckpt"))
  encoder_config = encoders.EncoderConfig(type="albert", albert=encoders.AlbertEncoderConfig(
      vocab_size=config.vocab_size, embedding_width=config.embedding_size,
      hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads, hidden_activation=config.hidden_act,
      intermediate_size=config.intermediate_size, dropout_rate=config.hidden_dropout_prob,
      attention_dropout_rate=config.attention_probs_dropout_prob,
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range))
  found["hub"] = str(root / "hub")
  export_tfhub_lib.export_model(found["hub"], encoder_config=encoder_config,
                                model_checkpoint_path=found["items"], with_mlm=True,
                                sp_model_file=str(SPM), do_lower_case=True)
  hub = tf.saved_model.load(found["hub"])
  found["hub_outputs"] = dict(hub(_encoder_inputs(inputs), training=False))
  found["hub_outputs"]["mlm_logits"] = hub.mlm(inputs, training=False)["mlm_logits"]
  return found


def test_the_artifacts_are_told_apart_by_their_names(garden, tmp_path):
  assert sources.detect(garden["encoder"]) == "model_garden"
  assert sources.detect(tf.train.latest_checkpoint(garden["pretrainer"]) + ".index") == (
      "model_garden")
  assert sources.detect(garden["items"]) == "model_garden"
  assert sources.detect(garden["hub"]) == "tfhub"
  assert checkpoints.source_format(garden["hub"]) == "tfhub"
  # Ours are not claimed: an encoder export (a SavedModel too) and a native checkpoint.
  pretrainer = AlbertPretrainer(garden["config"].replace(num_hidden_layers=1))
  ours = export_encoder(pretrainer, str(tmp_path / "export"))
  assert sources.detect(ours) is None and checkpoints.source_format(ours) == "savedmodel"
  native = native_checkpoint(pretrainer).save(str(tmp_path / "native" / "ckpt"))
  assert sources.detect(native) is None and checkpoints.source_format(native) == "native"


@pytest.mark.parametrize("kind", ["encoder", "pretrainer", "items"])
def test_a_model_garden_checkpoint_gives_model_gardens_outputs(garden, inputs, kind):
  config = garden["config"]
  model = AlbertEncoder(config) if kind == "encoder" else AlbertPretrainer(config)
  report = load_checkpoint(model, garden[kind])
  assert report.format == "model_garden" and not report.unused
  ours = _ours(model, inputs)
  theirs = garden["encoder_outputs" if kind == "encoder" else "pretrainer_outputs"]
  for name in ("sequence_output", "pooled_output", "mlm_logits"):
    if name in theirs:
      assert_close(ours[name], theirs[name])
  if kind != "encoder":  # a pretrainer: the MLM head came along, no sentence-order head
    assert "cls/predictions/output_bias" in report.loaded
    assert sorted(report.missing) == ["cls/seq_relationship/output_bias",
                                      "cls/seq_relationship/output_weights"]


def test_a_tfhub_savedmodel_gives_its_own_outputs_with_config_and_tokenizer(garden, inputs):
  weights = sources.read(garden["hub"])
  config = garden["config"]
  assert weights.config == {k: config.to_dict()[k] for k in weights.config}
  assert weights.spm_model_file == os.path.join(garden["hub"], "assets", "spiece.model")
  assert weights.do_lower_case is True and weights.config_file is None
  model = AlbertPretrainer(AlbertConfig.from_dict(weights.config))
  assert load_checkpoint(model, garden["hub"]).format == "tfhub"
  ours = _ours(model, inputs)
  for name in ("sequence_output", "pooled_output", "mlm_logits"):
    assert_close(ours[name], garden["hub_outputs"][name])


def test_a_tfhub_savedmodel_without_keras_metadata_needs_a_config_file(garden, tmp_path):
  bare = tmp_path / "bare"
  shutil.copytree(garden["hub"], bare)
  os.remove(bare / "keras_metadata.pb")
  assert sources.read(bare, with_arrays=False).config is None
  with pytest.raises(ValueError, match="--albert_config_file is needed for --from=tfhub"):
    convert.convert("tfhub", "tf1", bare, tmp_path / "out")
  assert not (tmp_path / "out").exists()
  with pytest.raises(ValueError, match=f"--albert_config_file is needed: {re.escape(str(bare))} "
                                       "does not carry the model's config"):
    ClassificationTask(ClassifierOptions(task_name="sst-2", init_checkpoint=str(bare),
                                         output_dir=str(tmp_path / "run"), spm_model_file=str(SPM)))
  config_file = tmp_path / "albert_config.json"
  garden["config"].to_json_file(config_file)
  convert.convert("tfhub", "tf1", bare, tmp_path / "out", albert_config_file=str(config_file))
  assert sources.detect(tmp_path / "out") is None


def test_a_wrong_name_map_would_fail_these_comparisons(garden, inputs, monkeypatch):
  query, key = model_garden.NAMES[QUERY], model_garden.NAMES[KEY]
  monkeypatch.setitem(model_garden.NAMES, QUERY, key)
  monkeypatch.setitem(model_garden.NAMES, KEY, query)
  model = AlbertEncoder(garden["config"])
  load_checkpoint(model, garden["encoder"])
  ours = _ours(model, inputs)["sequence_output"]
  with pytest.raises(AssertionError):
    assert_close(ours, garden["encoder_outputs"]["sequence_output"])


def test_convert_reads_both_into_tf1_and_huggingface(garden, inputs, tmp_path):
  config_file = tmp_path / "albert_config.json"
  garden["config"].to_json_file(config_file)
  with pytest.raises(ValueError, match="--albert_config_file is needed for --from=model_garden"):
    convert.convert("model_garden", "tf1", garden["pretrainer"], tmp_path / "no_config")
  assert not (tmp_path / "no_config").exists()
  convert.convert("model_garden", "tf1", garden["pretrainer"], tmp_path / "tf1",
                  albert_config_file=str(config_file), spm_model_file=str(SPM))
  converted = convert.convert("tfhub", "huggingface", garden["hub"], tmp_path / "hf")
  assert converted.head == "masked_lm" and converted.spm_model_file.endswith("spiece.model")
  assert (tmp_path / "hf" / "spiece.model").exists()
  assert huggingface.read_json(tmp_path / "hf" / "config.json")["architectures"] == [
      "AlbertForMaskedLM"]
  for out, theirs in (("tf1", garden["pretrainer_outputs"]), ("hf", garden["hub_outputs"])):
    model = AlbertPretrainer(garden["config"])
    load_checkpoint(model, tmp_path / out)
    ours = _ours(model, inputs)
    for name in ("sequence_output", "pooled_output", "mlm_logits"):
      assert_close(ours[name], theirs[name])


def test_convert_to_model_garden_restores_in_model_gardens_own_models(garden, inputs, tmp_path):
  tool = _tool()
  convert.convert("tfhub", "model_garden", garden["hub"], tmp_path / "mg")
  assert sorted(os.listdir(tmp_path / "mg")) == [
      "albert_config.json", "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "spiece.model"]
  mg_config = tool.configs.AlbertConfig.from_json_file(str(tmp_path / "mg" / CONFIG_NAME))
  latest = tf.train.latest_checkpoint(str(tmp_path / "mg"))
  encoder = tool._create_albert_model(mg_config)  # pylint: disable=protected-access
  tf.train.Checkpoint(encoder=encoder).restore(latest).assert_existing_objects_matched()
  sequence, pooled = encoder([inputs[k] for k in ("input_word_ids", "input_mask",
                                                  "input_type_ids")], training=False)
  assert_close(sequence, garden["encoder_outputs"]["sequence_output"])
  assert_close(pooled, garden["encoder_outputs"]["pooled_output"])
  # Written as BertPretrainerV2.checkpoint_items: the masked LM restores too.
  pretrainer = tool._create_pretrainer_model(mg_config)  # pylint: disable=protected-access
  tf.train.Checkpoint(**pretrainer.checkpoint_items).restore(latest).assert_consumed()
  assert_close(pretrainer(inputs, training=False)["mlm_logits"],
               garden["pretrainer_outputs"]["mlm_logits"])
  # An encoder alone is written as the converter tool writes one: Checkpoint(encoder=...).
  config_file = tmp_path / "albert_config.json"
  garden["config"].to_json_file(config_file)
  convert.convert("model_garden", "model_garden", garden["encoder"], tmp_path / "mg_encoder",
                  albert_config_file=str(config_file))
  encoder = tool._create_albert_model(mg_config)  # pylint: disable=protected-access
  tf.train.Checkpoint(encoder=encoder).restore(
      tf.train.latest_checkpoint(str(tmp_path / "mg_encoder"))).assert_consumed()
  assert_close(encoder([inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")],
                       training=False)[0], garden["encoder_outputs"]["sequence_output"])
  # ... and reads back with its config and vocabulary, no flags needed.
  weights = sources.read(tmp_path / "mg")
  assert weights.config == {k: garden["config"].to_dict()[k] for k in weights.config}
  assert weights.spm_model_file == str(tmp_path / "mg" / "spiece.model")
  # What Model Garden's AlbertEncoder cannot hold is refused before anything is written.
  two_groups = tmp_path / "groups.json"
  garden["config"].replace(num_hidden_groups=2).to_json_file(two_groups)
  source = tmp_path / "tf1_groups"
  save_tf1_checkpoint(AlbertPretrainer(garden["config"].replace(num_hidden_groups=2)),
                      str(source / "model.ckpt"))
  with pytest.raises(ValueError, match="num_hidden_groups=2"):
    convert.convert("tf1", "model_garden", source, tmp_path / "refused",
                    albert_config_file=str(two_groups))
  assert not (tmp_path / "refused").exists()


def test_run_classifier_starts_from_a_tfhub_savedmodel_alone(garden, tmp_path):
  """No --albert_config_file, no --spm_model_file: the SavedModel's Keras metadata gives the
  config and its assets the SentencePiece model."""
  data = tmp_path / "csv"
  data.mkdir()
  rows = ["review,stars"] + [f"{'great fun' if i % 2 else 'dull and slow'} take {i},{i % 2}"
                             for i in range(16)]
  for split in ("train", "dev", "test"):
    (data / f"{split}.csv").write_text("\n".join(rows) + "\n")
  run_classifier(ClassifierOptions(
      task_name="csv", data_dir=str(data), output_dir=str(tmp_path / "out"),
      **starts.start_defaults({"init_checkpoint": garden["hub"], "albert_config_file": None,
                        "spm_model_file": None, "vocab_file": None, "do_lower_case": True}),
      do_train=True, max_seq_length=16, train_batch_size=8,
      train_step=2, save_checkpoints_steps=2, iterations_per_loop=2, learning_rate=1e-5,
      log_every_seconds=0, csv_options=dict(text_a_column="review", label_column="stars")))
  # Two small steps from Model Garden's weights: still theirs, not a fresh initialisation.
  started = AlbertEncoder(garden["config"])
  load_checkpoint(started, tmp_path / "out")
  original = AlbertEncoder(garden["config"])
  load_checkpoint(original, garden["hub"])
  trained = started.embedding_layer.position_embeddings.numpy()
  before = original.embedding_layer.position_embeddings.numpy()
  # 2 steps at lr 1e-5 at most.
  np.testing.assert_allclose(trained, before, rtol=0, atol=adamw_step_bound(1e-5, 2, before))
  # A Model Garden checkpoint starts the same job (its config given): the run's model starts
  # from its weights, every encoder weight of it loaded.
  config_file = tmp_path / "albert_config.json"
  garden["config"].to_json_file(config_file)
  run = Run(ClassificationTask(ClassifierOptions(
      task_name="csv", data_dir=str(data), output_dir=str(tmp_path / "from_garden"),
      albert_config_file=str(config_file), spm_model_file=str(SPM),
      init_checkpoint=garden["encoder"], do_train=True, max_seq_length=16, train_batch_size=8,
      train_step=2, csv_options=dict(text_a_column="review", label_column="stars"))))
  run.loop.restore_or_initialize()
  assert run.loop.untrained.startswith(garden["encoder"])  # only the classifier head is new
  garden_encoder = AlbertEncoder(garden["config"])
  load_checkpoint(garden_encoder, garden["encoder"])
  for ours, theirs in zip(run.loop.model.encoder.weights, garden_encoder.weights):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# --- bad inputs ---------------------------------------------------------------------------------
def _without(prefix, dropped, out):
  """A copy of an object-based checkpoint without the variable whose Keras name is `dropped`
  (its value and its object graph entry)."""
  reader = tf.train.load_checkpoint(prefix)
  graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
      reader.get_tensor(model_garden.OBJECT_GRAPH))
  gone = None
  for node in graph.nodes:
    for attribute in list(node.attributes):
      if attribute.full_name == dropped:
        gone = attribute.checkpoint_key
        node.attributes.remove(attribute)
  names = sorted(n for n in reader.get_variable_to_shape_map()
                 if n not in (gone, model_garden.OBJECT_GRAPH))
  tensors = [reader.get_tensor(n) for n in names]
  names.append(model_garden.OBJECT_GRAPH)
  tensors.append(graph.SerializeToString())
  os.makedirs(os.path.dirname(out), exist_ok=True)
  tf.raw_ops.SaveV2(prefix=out, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=tensors)
  return out


def test_a_checkpoint_missing_a_variable_is_refused_naming_file_and_variable(garden, tmp_path):
  damaged = _without(tf.train.latest_checkpoint(garden["encoder"]), "pooler_transform/kernel",
                     str(tmp_path / "damaged" / "ckpt-1"))
  assert sources.detect(damaged) == "model_garden"
  model = AlbertEncoder(garden["config"])
  before = [v.numpy() for v in model.variables]
  with pytest.raises(CheckpointError, match=re.escape(damaged) + " lacks the variable "
                                            "'pooler_transform/kernel'"):
    load_checkpoint(model, damaged)
  assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.variables))
  config_file = tmp_path / "albert_config.json"
  garden["config"].to_json_file(config_file)
  with pytest.raises(CheckpointError, match="pooler_transform/kernel"):
    convert.convert("model_garden", "tf1", damaged, tmp_path / "out",
                    albert_config_file=str(config_file))
  assert not (tmp_path / "out").exists()


def test_a_config_that_does_not_fit_the_weights_is_refused_naming_the_variable(garden, tmp_path):
  wider = garden["config"].replace(intermediate_size=48)
  with pytest.raises(CheckpointError, match=r"ffn_1/intermediate/dense/kernel.*\[32, 64\].*"
                                            + re.escape(garden["encoder"])):
    load_checkpoint(AlbertEncoder(wider), garden["encoder"])
  # The head count, which the original's [H, H] shapes do not show, is checked against a
  # config that comes with the checkpoint.
  beside = tmp_path / "beside"
  beside.mkdir()
  for name in os.listdir(garden["encoder"]):
    (beside / name).write_bytes((open(os.path.join(garden["encoder"], name), "rb")).read())
  garden["config"].replace(num_attention_heads=4).to_json_file(beside / "albert_config.json")
  message = f"num_attention_heads=4.*'{QUERY}' of {re.escape(str(beside))}"
  with pytest.raises(CheckpointError, match=message):
    sources.read(beside)
  # And against a config given for an artifact that carries none (--albert_config_file).
  four_heads = AlbertEncoder(garden["config"].replace(num_attention_heads=4))
  for artifact in (garden["encoder"], garden["hub"]):
    message = (f"{re.escape(str(artifact))}\\S*: its attention weights are split into 2 "
               "heads, but the model's config says num_attention_heads=4")
    with pytest.raises(CheckpointError, match=message):
      load_checkpoint(four_heads, artifact)


def test_a_bert_hub_encoder_is_refused_naming_file_and_variable(tmp_path):
  from official.legacy.bert import configs  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import export_tfhub_lib  # pylint: disable=g-import-not-at-top
  bert_config = configs.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=16,
                                   max_position_embeddings=16)
  encoder = export_tfhub_lib.get_bert_encoder(bert_config)
  checkpoint = tf.train.Checkpoint(encoder=encoder).save(str(tmp_path / "bert" / "ckpt"))
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                             + [f"w{i}" for i in range(15)]) + "\n")
  hub = str(tmp_path / "bert_hub")
  export_tfhub_lib.export_model(hub, bert_config=bert_config, model_checkpoint_path=checkpoint,
                                with_mlm=False, vocab_file=str(vocab), do_lower_case=True)
  assert sources.detect(hub) == "tfhub"
  message = f"{re.escape(hub)} holds a BERT encoder, not ALBERT: its variable 'transformer/layer_0/"
  with pytest.raises(CheckpointError, match=message):
    load_checkpoint(AlbertEncoder(AlbertConfig(vocab_size=20)), hub)
  with pytest.raises(CheckpointError, match=message):
    convert.convert("tfhub", "tf1", hub, tmp_path / "out", albert_config_file=str(
        ROOT / "configs" / "tiny.json"))
  assert not (tmp_path / "out").exists()


# --- the preprocessing companion ----------------------------------------------------------------
EXAMPLES = ["The quick brown fox jumps over the lazy dog.",
            "ALBERT: A Lite BERT for Self-supervised Learning of Language Representations",
            "Hello, World! How are you today?",
            "Café owners in Zürich don't open on Sundays."]


def test_our_tokenization_equals_the_preprocessing_models_ids():
  """albert_en_preprocess is export_tfhub's `export_preprocessing` of this Keras model (built
  here as that function builds it, without the save)."""
  from official.nlp.tools import export_tfhub_lib  # pylint: disable=g-import-not-at-top
  preprocess = export_tfhub_lib.create_preprocessing(
      sp_model_file=str(SPM), do_lower_case=True, tokenize_with_offsets=False,
      default_seq_length=32)
  packed = preprocess(tf.constant(EXAMPLES))
  python = FullTokenizer(spm_model_file=str(SPM), do_lower_case=True)
  graph = InGraphTokenizer(spm_model_file=str(SPM), do_lower_case=True)
  in_graph = graph.tokenize(tf.constant(EXAMPLES)).to_list()
  for row, text in enumerate(EXAMPLES):
    ids = [python.cls_id] + python.encode_ids([text])[0] + [python.sep_id]
    assert packed["input_word_ids"][row].numpy().tolist() == ids + [0] * (32 - len(ids))
    assert packed["input_mask"][row].numpy().sum() == len(ids)
    assert in_graph[row] == ids[1:-1]
  # Where they differ: the original splits a piece that ends in a digit and a comma ("1990,")
  # into "1990" and ","; the preprocessing model keeps SentencePiece's own piece.
  text = "In 1990, the"
  theirs = preprocess(tf.constant([text]))["input_word_ids"][0].numpy()
  pieces = python.sp_model.encode(preprocess_text(text, lower=True), out_type=str)
  assert "\u2581" + "1990," in pieces
  assert theirs[:len(pieces) + 2].tolist() == (
      [python.cls_id] + python.sp_model.piece_to_id(pieces) + [python.sep_id])
  assert python.tokenize(text)[:3] == ["\u2581in", "\u2581" + "1990", ","]


def _convert_error(capsys, source, out):
  from albert_tf.cli import convert as cli  # pylint: disable=g-import-not-at-top
  assert cli.main(["--from=tfhub", "--to=tf1", f"--input_dir={source}",
                   f"--output_dir={out}"]) == 1
  error = capsys.readouterr().err
  assert error.count("\n") == 1 and "Traceback" not in error, error
  return error


def test_a_tfhub_download_cut_short_is_one_line_naming_the_file(garden, tmp_path, capsys):
  """A truncated variables.data (was IndexError: Read less bytes than requested) and a
  truncated saved_model.pb (was called one of our encoder exports, with that advice)."""
  values = dict(albert_config_file=None, spm_model_file=None, vocab_file=None,
                do_lower_case=True)
  cut_data = tmp_path / "cut_data"
  shutil.copytree(garden["hub"], cut_data)
  (data_file,) = (cut_data / "variables").glob("variables.data-*")
  data_file.write_bytes(data_file.read_bytes()[:100])
  message = (re.escape(str(cut_data / "variables" / "variables")) + r": .*are its \.data files "
             r"damaged or truncated\?")
  model = AlbertPretrainer(garden["config"])
  before = [v.numpy() for v in model.variables]
  with pytest.raises(CheckpointError, match=r"cannot read variable .* of checkpoint " + message):
    load_checkpoint(model, str(cut_data))
  assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.variables))
  with pytest.raises(ValueError, match=message):  # run_classifier's start, before the job
    starts.start_defaults(dict(values, init_checkpoint=str(cut_data)))
  assert re.search(message, _convert_error(capsys, cut_data, tmp_path / "out_data"))

  cut_graph = tmp_path / "cut_graph"
  shutil.copytree(garden["hub"], cut_graph)
  graph = cut_graph / "saved_model.pb"
  graph.write_bytes(graph.read_bytes()[:graph.stat().st_size // 3])
  message = (r"cannot load the SavedModel " + re.escape(str(cut_graph)) + r": its "
             r"saved_model\.pb \(\d+ bytes\) does not parse \(.*\): damaged or incomplete, e\.g\. "
             r"a download cut short; download and extract it again")
  with pytest.raises(ValueError, match=message):
    load_checkpoint(model, str(cut_graph))
  with pytest.raises(ValueError, match=message):
    starts.start_defaults(dict(values, init_checkpoint=str(cut_graph)))
  error = _convert_error(capsys, cut_graph, tmp_path / "out_graph")
  assert re.search(message, error) and "export_savedmodel" not in error, error
  assert not any(p.name.startswith("out_") for p in tmp_path.iterdir())
