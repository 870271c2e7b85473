"""Hugging Face interop: directories written and read by name (SPEC "Hugging Face interop"),
round trips through `python -m albert_tf.cli.convert`, refusals, and starting from a directory."""

import json

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from albert_tf import AlbertConfig, AlbertPretrainer, load_checkpoint, save_tf1_checkpoint
from albert_tf.cli import convert as convert_cli
from albert_tf.cli.runs import run_ner
from albert_tf.interop import convert
from albert_tf.interop import starts
from albert_tf.interop.checkpoints import native_checkpoint
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.tasks.distillation import DistillOptions, teacher_config
from albert_tf.tasks.ner import NerOptions
from conftest import ROOT, SHARED_DATA
from conftest import encoder_inputs as _inputs
from conftest import randomised as _randomised

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
GROUPS, INNER = 2, 2


@pytest.fixture(scope="module")
def config():
  return AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(
      vocab_size=120, num_hidden_groups=GROUPS, inner_group_num=INNER, num_hidden_layers=2)


def _hf_state_dict(model):
  """transformers' AlbertForPreTraining state dict of `model`, written out name by name from
  SPEC's list (independent of albert_tf.interop.huggingface's table): Linear weights are
  [out, in]."""
  enc = model.encoder
  emb = enc.embedding_layer
  out = {"albert.embeddings.word_embeddings.weight": emb.word_embeddings,
         "albert.embeddings.position_embeddings.weight": emb.position_embeddings,
         "albert.embeddings.token_type_embeddings.weight": emb.token_type_embeddings,
         "albert.embeddings.LayerNorm.weight": emb.layer_norm.gamma,
         "albert.embeddings.LayerNorm.bias": emb.layer_norm.beta}

  def linear(name, dense):
    out[name + ".weight"] = tf.transpose(dense.kernel)
    out[name + ".bias"] = dense.bias

  def norm(name, layer):
    out[name + ".weight"], out[name + ".bias"] = layer.gamma, layer.beta

  linear("albert.encoder.embedding_hidden_mapping_in", enc.embedding_projection)
  for g in range(GROUPS):
    for k in range(INNER):
      block = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{k}."
      attention = enc.attention_sublayers[f"group_{g}/inner_group_{k}"]
      ffn = enc.ffn_sublayers[f"group_{g}/inner_group_{k}"]
      for part in ("query", "key", "value"):
        linear(block + "attention." + part, getattr(attention.attention, part))
      linear(block + "attention.dense", attention.output_dense)
      norm(block + "attention.LayerNorm", attention.layer_norm)
      linear(block + "ffn", ffn.intermediate)
      linear(block + "ffn_output", ffn.output_dense)
      norm(block + "full_layer_layer_norm", ffn.layer_norm)
  linear("albert.pooler", enc.pooler_layer)
  linear("predictions.dense", model.masked_lm.dense)
  norm("predictions.LayerNorm", model.masked_lm.layer_norm)
  out["predictions.bias"] = model.masked_lm.output_bias
  out["predictions.decoder.weight"] = emb.word_embeddings
  out["predictions.decoder.bias"] = model.masked_lm.output_bias
  out["sop_classifier.classifier.weight"] = model.sentence_order.output_weights
  out["sop_classifier.classifier.bias"] = model.sentence_order.output_bias
  return {name: np.asarray(value) for name, value in out.items()}


def _hf_config(config, **extra):
  """A config.json as transformers writes it: keys equal to its defaults left out."""
  values = {"architectures": ["AlbertForPreTraining"], "model_type": "albert",
            "vocab_size": config.vocab_size, "embedding_size": config.embedding_size,
            "hidden_size": config.hidden_size, "num_hidden_layers": config.num_hidden_layers,
            "num_hidden_groups": config.num_hidden_groups, "inner_group_num": INNER,
            "num_attention_heads": config.num_attention_heads,
            "intermediate_size": config.intermediate_size,
            "max_position_embeddings": config.max_position_embeddings,
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
  values.update(extra)
  return values


def _pretraining_outputs(model, config):
  inputs = _inputs(config.vocab_size)
  inputs["masked_lm_positions"] = tf.constant([[1, 3], [0, 5]])
  out = model(inputs, training=False)
  return [out[k].numpy() for k in ("sequence_output", "pooled_output", "mlm_logits",
                                   "sop_logits")]


def test_a_hand_built_huggingface_directory_loads_and_gives_our_models_outputs(config,
                                                                               tmp_path):
  source = _randomised(AlbertPretrainer(config), seed=1)
  hf_dir = tmp_path / "hf"
  hf_dir.mkdir()
  save_file(_hf_state_dict(source), str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
  (hf_dir / "config.json").write_text(json.dumps(_hf_config(config)))
  # The config is read from config.json (hidden_act left out: transformers' default gelu_new,
  # the original's tanh gelu).
  read = AlbertConfig.from_json_file(hf_dir / "config.json")
  assert read.hidden_act == "gelu" and read.to_dict() == config.to_dict()
  model = _randomised(AlbertPretrainer(read), seed=2)
  report = load_checkpoint(model, str(hf_dir))
  assert report.format == "huggingface" and not report.missing and not report.unused
  for got, want in zip(_pretraining_outputs(model, config), _pretraining_outputs(source, config)):
    np.testing.assert_array_equal(got, want)
  # AlbertModel's own layout (no `albert.` prefix, no heads) loads into an encoder, here as
  # two shards with an index, the word embeddings stored in bfloat16.
  base_dir = tmp_path / "base"
  base_dir.mkdir()
  base = {k[len("albert."):]: v for k, v in _hf_state_dict(source).items()
          if k.startswith("albert.")}
  table = base.pop("embeddings.word_embeddings.weight")
  bf16 = (table.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bfloat16
  _write_bfloat16_safetensors({"embeddings.word_embeddings.weight": bf16},
                              base_dir / "model-00002-of-00002.safetensors")
  save_file(base, str(base_dir / "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
  weight_map = {k: "model-00001-of-00002.safetensors" for k in base}
  weight_map["embeddings.word_embeddings.weight"] = "model-00002-of-00002.safetensors"
  (base_dir / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
  (base_dir / "config.json").write_text(json.dumps(_hf_config(
      config, architectures=["AlbertModel"])))
  encoder = AlbertEncoder(config)
  load_checkpoint(encoder, str(base_dir))
  np.testing.assert_array_equal(encoder.embedding_layer.word_embeddings.numpy(),
                                (bf16.astype(np.uint32) << 16).view(np.float32))
  encoder.embedding_layer.word_embeddings.assign(table)
  np.testing.assert_array_equal(encoder(_inputs(config.vocab_size))["pooled_output"],
                                source.encoder(_inputs(config.vocab_size))["pooled_output"])


def _write_bfloat16_safetensors(tensors, path):
  """The safetensors layout by hand (8-byte header size, JSON header, data): numpy has no
  bfloat16, so `tensors` holds their raw uint16 bits."""
  header, data, offset = {"__metadata__": {"format": "pt"}}, b"", 0
  for name, bits in tensors.items():
    raw = bits.tobytes()
    header[name] = {"dtype": "BF16", "shape": list(bits.shape),
                    "data_offsets": [offset, offset + len(raw)]}
    data, offset = data + raw, offset + len(raw)
  encoded = json.dumps(header).encode()
  path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data)


def _spec_keys():
  """The key list of SPEC "Hugging Face interop" for AlbertForPreTraining, G=2, K=2."""
  keys = {f"albert.embeddings.{n}_embeddings.weight" for n in ("word", "position", "token_type")}
  keys |= {"albert.embeddings.LayerNorm.weight", "albert.embeddings.LayerNorm.bias",
           "albert.encoder.embedding_hidden_mapping_in.weight",
           "albert.encoder.embedding_hidden_mapping_in.bias",
           "albert.pooler.weight", "albert.pooler.bias", "predictions.bias",
           "sop_classifier.classifier.weight", "sop_classifier.classifier.bias"}
  keys |= {f"predictions.{m}.{p}" for m in ("dense", "LayerNorm", "decoder")
           for p in ("weight", "bias")}
  for g in range(GROUPS):
    for k in range(INNER):
      for m in ("attention.query", "attention.key", "attention.value", "attention.dense",
                "attention.LayerNorm", "ffn", "ffn_output", "full_layer_layer_norm"):
        keys |= {f"albert.encoder.albert_layer_groups.{g}.albert_layers.{k}.{m}.{p}"
                 for p in ("weight", "bias")}
  return keys


def _tensors(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_tf1_to_huggingface_to_tf1_is_exact_and_writes_specs_names_config_and_tokenizer(
    config, tmp_path):
  source = _randomised(AlbertPretrainer(config), seed=3)
  save_tf1_checkpoint(source, str(tmp_path / "tf1" / "model.ckpt"), global_step=11)
  config.to_json_file(str(tmp_path / "tf1" / "albert_config.json"))
  assert convert_cli.main(["--from=tf1", "--to=huggingface", f"--checkpoint={tmp_path / 'tf1'}",
                       f"--spm_model_file={SPM}", "--do_lower_case=false",
                       f"--output_dir={tmp_path / 'hf'}"]) == 0
  written = load_file(str(tmp_path / "hf" / "model.safetensors"))
  assert set(written) == _spec_keys()
  np.testing.assert_array_equal(written["albert.encoder.albert_layer_groups.1.albert_layers.0."
                                        "ffn.weight"],
                                source.encoder.ffn_sublayers["group_1/inner_group_0"]
                                .intermediate.kernel.numpy().T)
  assert written["albert.encoder.embedding_hidden_mapping_in.weight"].shape == (32, 16)
  assert written["sop_classifier.classifier.weight"].shape == (2, 32)
  hf_config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert hf_config["model_type"] == "albert" and hf_config["hidden_act"] == "gelu_new"
  assert hf_config["architectures"] == ["AlbertForPreTraining"]
  assert {k: hf_config[k] for k in ("embedding_size", "hidden_size", "num_hidden_groups",
                                    "inner_group_num", "layer_norm_eps")} == {
      "embedding_size": 16, "hidden_size": 32, "num_hidden_groups": 2, "inner_group_num": 2,
      "layer_norm_eps": 1e-12}
  assert (tmp_path / "hf" / "spiece.model").read_bytes() == SPM.read_bytes()
  tokenizer = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
  assert tokenizer["do_lower_case"] is False and tokenizer["keep_accents"] is False
  assert tokenizer["tokenizer_class"] == "AlbertTokenizer"

  assert convert_cli.main(["--from=huggingface", "--to=tf1", f"--input_dir={tmp_path / 'hf'}",
                       f"--output_dir={tmp_path / 'back'}"]) == 0
  before, after = _tensors(tmp_path / "tf1" / "model.ckpt"), _tensors(tmp_path / "back" /
                                                                     "model.ckpt")
  del before["global_step"]
  assert set(after) == set(before)
  for name, value in before.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
  assert AlbertConfig.from_json_file(tmp_path / "back" / "albert_config.json").to_dict() == (
      config.to_dict())
  # The tokenizer files came along (and their do_lower_case with them).
  assert (tmp_path / "back" / "spiece.model").read_bytes() == SPM.read_bytes()
  # A script started from the directory takes its config, vocabulary and do_lower_case, and a
  # distillation teacher there finds its config.json.
  values = dict(init_checkpoint=str(tmp_path / "hf"), albert_config_file=None,
                spm_model_file=None, vocab_file=None, do_lower_case=True)
  values = starts.start_defaults(values)
  assert values == dict(init_checkpoint=str(tmp_path / "hf"),
                        albert_config_file=str(tmp_path / "hf" / "config.json"),
                        spm_model_file=str(tmp_path / "hf" / "spiece.model"), vocab_file=None,
                        do_lower_case=False)
  teacher, path = teacher_config(DistillOptions(teacher_checkpoint=str(tmp_path / "hf")), None)
  assert path == str(tmp_path / "hf" / "config.json") and teacher.to_dict() == config.to_dict()


def test_our_classifier_squad_v1_and_race_checkpoints_round_trip_through_huggingface_exactly(
    config, tmp_path):
  for name, model, architecture, head_key in (
      ("classifier", AlbertClassifier(config, num_labels=3), "AlbertForSequenceClassification",
       "classifier.weight"),
      ("squad", AlbertSquad(config), "AlbertForQuestionAnswering", "qa_outputs.weight"),
      ("race", AlbertMultipleChoice(config).build_for(), "AlbertForMultipleChoice",
       "classifier.weight")):
    _randomised(model, seed=4)
    tf.train.CheckpointManager(native_checkpoint(model), str(tmp_path / name), 1).save()
    config.to_json_file(str(tmp_path / name / "albert_config.json"))
    hf, back = tmp_path / f"{name}_hf", tmp_path / f"{name}_back"
    head = ["--head=multiple_choice"] if name == "race" else []  # names alone say regression
    assert convert_cli.main(["--from=native", "--to=huggingface", f"--checkpoint={tmp_path / name}",
                         f"--output_dir={hf}"] + head) == 0
    hf_config = json.loads((hf / "config.json").read_text())
    assert hf_config["architectures"] == [architecture]
    weights = load_file(str(hf / "model.safetensors"))
    assert weights[head_key].shape == {"classifier": (3, 32), "squad": (2, 32),
                                       "race": (1, 32)}[name]
    assert convert_cli.main(["--from=huggingface", "--to=native", f"--input_dir={hf}",
                         f"--output_dir={back}"]) == 0
    before = _tensors(tf.train.latest_checkpoint(str(tmp_path / name)))
    after = _tensors(tf.train.latest_checkpoint(str(back)))
    weights_only = {k for k in before if k.endswith("VARIABLE_VALUE") and "save_counter" not in k}
    assert weights_only <= set(after)
    for key in weights_only:
      np.testing.assert_array_equal(after[key], before[key], err_msg=key)
  assert hf_config is not None
  classifier_config = json.loads((tmp_path / "classifier_hf" / "config.json").read_text())
  assert len(classifier_config["id2label"]) == 3
  assert classifier_config["problem_type"] == "single_label_classification"


def test_models_huggingface_cannot_express_are_refused_and_nothing_is_written(config,
                                                                             tmp_path, capsys):
  no_projection = config.replace(embedding_size=32)
  squad_v2 = AlbertSquad(config, version_2=True)
  cases = (("e_equals_h", AlbertPretrainer(no_projection), no_projection, "E->H projection"),
           ("squad_v2", squad_v2, config, "v2.0 head"))
  for name, model, model_config, message in cases:
    save_tf1_checkpoint(model, str(tmp_path / name / "model.ckpt"))
    model_config.to_json_file(str(tmp_path / name / "albert_config.json"))
    out = tmp_path / f"{name}_hf"
    assert convert_cli.main(["--from=tf1", "--to=huggingface", f"--checkpoint={tmp_path / name}",
                         f"--output_dir={out}"]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(f"{name}_hf.tmp*"))
  # A damaged weights file is named.
  (tmp_path / "damaged").mkdir()
  (tmp_path / "damaged" / "config.json").write_text(json.dumps(_hf_config(config)))
  (tmp_path / "damaged" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00"
                                                           b"not json at all!")
  assert convert_cli.main(["--from=huggingface", "--to=tf1", f"--input_dir={tmp_path / 'damaged'}",
                       f"--output_dir={tmp_path / 'damaged_out'}"]) == 1
  assert "damaged/model.safetensors: not a safetensors file" in capsys.readouterr().err
  # A directory that is not empty is never overwritten.
  (tmp_path / "taken").mkdir()
  (tmp_path / "taken" / "keep.txt").write_text("x")
  assert convert_cli.main(["--from=tf1", "--to=native", f"--checkpoint={tmp_path / 'squad_v2'}",
                       f"--output_dir={tmp_path / 'taken'}"]) == 1
  assert "not empty" in capsys.readouterr().err
  assert [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]


NER_LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def _emissions(model, vocab_size):
  """The token head's float32 [batch, seq, labels] at every position (word_positions 0..seq)."""
  inputs = _inputs(vocab_size)
  batch, seq = inputs["input_word_ids"].shape
  positions = tf.constant(np.tile(np.arange(seq, dtype=np.int32), (batch, 1)))
  return model(dict(inputs, word_positions=positions), training=False).numpy()


def _ner_output_dir(model, directory, **flags):
  """`model` saved as run_ner leaves it: checkpoint, albert_config.json, model_flags.json."""
  tf.train.CheckpointManager(native_checkpoint(model), str(directory), 1).save()
  model.config.to_json_file(str(directory / "albert_config.json"))
  (directory / "model_flags.json").write_text(json.dumps(dict(
      {"task_name": "ner", "labels": model.labels, "use_crf": model.use_crf}, **flags)))


def test_a_run_ner_checkpoint_round_trips_through_albert_for_token_classification_exactly(
    config, tmp_path):
  source = _randomised(AlbertTokenClassifier(config, NER_LABELS), seed=5)
  _ner_output_dir(source, tmp_path / "ner", word_split="whitespace")
  hf, back = tmp_path / "hf", tmp_path / "back"
  assert convert_cli.main(["--from=native", "--to=huggingface", f"--checkpoint={tmp_path / 'ner'}",
                       f"--output_dir={hf}"]) == 0
  hf_config = json.loads((hf / "config.json").read_text())
  assert hf_config["architectures"] == ["AlbertForTokenClassification"]
  assert hf_config["id2label"] == {str(i): label for i, label in enumerate(NER_LABELS)}
  assert hf_config["label2id"]["B-PER"] == NER_LABELS.index("B-PER")
  written = load_file(str(hf / "model.safetensors"))
  np.testing.assert_array_equal(written["classifier.weight"],
                                source.token_head.output_weights.numpy())
  assert not any(name.startswith("token_classifier") for name in written)
  # Back to ours, directly and through the original's names: the same weights, bit for bit,
  # the same emissions, and the labels in model_flags.json (its other flags kept from TF1).
  assert convert_cli.main(["--from=huggingface", "--to=native", f"--input_dir={hf}",
                       f"--output_dir={back}"]) == 0
  assert convert_cli.main(["--from=native", "--to=tf1", f"--checkpoint={tmp_path / 'ner'}",
                       f"--output_dir={tmp_path / 'tf1'}"]) == 0
  assert "token_classifier/output_weights" in _tensors(tmp_path / "tf1" / "model.ckpt")
  assert convert_cli.main(["--from=tf1", "--to=native", f"--checkpoint={tmp_path / 'tf1'}",
                       f"--output_dir={tmp_path / 'tf1_back'}"]) == 0
  before = _tensors(tf.train.latest_checkpoint(str(tmp_path / "ner")))
  weights = {k for k in before if k.endswith("VARIABLE_VALUE") and "save_counter" not in k}
  assert any(k.startswith("token_head/") for k in weights)
  want = _emissions(source, config.vocab_size)
  for directory, flags in ((back, {}), (tmp_path / "tf1_back", {"word_split": "whitespace"})):
    after = _tensors(tf.train.latest_checkpoint(str(directory)))
    for key in weights:
      np.testing.assert_array_equal(after[key], before[key], err_msg=f"{directory.name} {key}")
    assert json.loads((directory / "model_flags.json").read_text()) == dict(
        {"task_name": "ner", "labels": NER_LABELS, "use_crf": False}, **flags)
    model = convert.read("native", directory).model
    assert isinstance(model, AlbertTokenClassifier) and model.labels == NER_LABELS
    np.testing.assert_array_equal(_emissions(model, config.vocab_size), want)


def test_an_albert_for_token_classification_directory_is_told_by_its_architectures(config,
                                                                                  tmp_path):
  """transformers names the sentence and the token classifier alike (`classifier`); only
  config.json's `architectures` tells them apart, and its id2label names the tags."""
  encoder_source = _randomised(AlbertPretrainer(config), seed=6)
  rng = np.random.default_rng(6)
  head = {"classifier.weight": rng.normal(size=(5, 32)).astype(np.float32),
          "classifier.bias": rng.normal(size=5).astype(np.float32)}
  # As transformers saves AlbertForTokenClassification: `albert.*` without the pooler.
  state = {k: v for k, v in _hf_state_dict(encoder_source).items()
           if k.startswith("albert.") and not k.startswith("albert.pooler.")}
  labels = ["O", "B-ANIMAL", "I-ANIMAL", "B-PLANT", "I-PLANT"]
  hf = tmp_path / "hf"
  hf.mkdir()
  save_file(dict(state, **head), str(hf / "model.safetensors"), metadata={"format": "pt"})
  (hf / "config.json").write_text(json.dumps(_hf_config(
      config, architectures=["AlbertForTokenClassification"],
      id2label={str(i): label for i, label in enumerate(labels)},
      label2id={label: i for i, label in enumerate(labels)})))
  converted = convert.read("huggingface", hf)
  assert converted.head == "token_classification" and converted.labels == labels
  want = AlbertTokenClassifier(config, labels, encoder=encoder_source.encoder)
  want.token_head.output_weights.assign(head["classifier.weight"])
  want.token_head.output_bias.assign(head["classifier.bias"])
  np.testing.assert_array_equal(_emissions(converted.model, config.vocab_size),
                                _emissions(want, config.vocab_size))
  # run_ner --init_checkpoint takes the head too; a sentence classifier takes the encoder only.
  tagger = AlbertTokenClassifier(config, labels)
  assert load_checkpoint(tagger, str(hf)).restored(tagger.token_head.trainable_variables)
  sentence = AlbertClassifier(config, 5)
  report = load_checkpoint(sentence, str(hf))
  assert not report.restored(sentence.head.trainable_variables)
  assert "classifier.weight" in report.unused
  # The same files said to be AlbertForSequenceClassification are a sentence classifier.
  values = json.loads((hf / "config.json").read_text())
  (hf / "config.json").write_text(json.dumps(dict(
      values, architectures=["AlbertForSequenceClassification"])))
  assert convert.read("huggingface", hf).head == "classification"


def test_run_ner_predicts_on_a_converted_directory_with_the_labels_it_carried(tmp_path):
  """--do_predict with --output_dir at a huggingface -> native conversion: the tags come from
  the directory's model_flags.json (config.json's id2label) and the predictions are the source
  run's."""
  tiny = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  source = _randomised(AlbertTokenClassifier(tiny, NER_LABELS), seed=7)
  _ner_output_dir(source, tmp_path / "ner")
  blocks = (SHARED_DATA / "ner" / "conll2003" / "test.txt").read_text().split("\n\n")
  (tmp_path / "test.txt").write_text("\n\n".join(blocks[:5]) + "\n\n")
  assert convert_cli.main(["--from=native", "--to=huggingface", f"--checkpoint={tmp_path / 'ner'}",
                       f"--spm_model_file={SPM}", f"--output_dir={tmp_path / 'hf'}"]) == 0
  assert convert_cli.main(["--from=huggingface", "--to=native", f"--input_dir={tmp_path / 'hf'}",
                       f"--output_dir={tmp_path / 'back'}"]) == 0
  for name in ("ner", "back"):
    run_ner(NerOptions(albert_config_file=str(tmp_path / name / "albert_config.json"),
                       spm_model_file=str(SPM), data_format="conll",
                       test_file=str(tmp_path / "test.txt"), output_dir=str(tmp_path / name),
                       do_predict=True, max_seq_length=32, doc_stride=12))
  predicted = [(tmp_path / name / "test_predictions.txt").read_text() for name in ("ner", "back")]
  assert predicted[0] == predicted[1]
  assert {line.split()[-1] for line in predicted[1].splitlines() if line.strip()} <= set(
      NER_LABELS)


def test_a_crf_tagger_is_refused_for_huggingface_and_keeps_its_crf_in_tf1(config, tmp_path,
                                                                          capsys):
  source = _randomised(AlbertTokenClassifier(config, NER_LABELS, use_crf=True), seed=8)
  _ner_output_dir(source, tmp_path / "ner")
  command = ["--from=native", "--to=huggingface", f"--checkpoint={tmp_path / 'ner'}"]
  assert convert_cli.main(command + [f"--output_dir={tmp_path / 'hf'}"]) == 1
  error = capsys.readouterr().err
  assert "has a CRF" in error and "no counterpart" in error and "--head=encoder" in error
  assert not (tmp_path / "hf").exists() and not list(tmp_path.glob("hf.tmp*"))
  assert convert_cli.main(command + ["--head=encoder", f"--output_dir={tmp_path / 'enc'}"]) == 0
  assert json.loads((tmp_path / "enc" / "config.json").read_text())["architectures"] == [
      "AlbertModel"]
  # Between our formats the CRF comes along.
  assert convert_cli.main(["--from=native", "--to=tf1", f"--checkpoint={tmp_path / 'ner'}",
                       f"--output_dir={tmp_path / 'tf1'}"]) == 0
  tf1 = _tensors(tmp_path / "tf1" / "model.ckpt")
  np.testing.assert_array_equal(tf1["token_classifier/crf/transitions"],
                                source.crf.transitions.numpy())
  back = convert.read("tf1", tmp_path / "tf1")
  assert back.use_crf and back.labels == NER_LABELS
  np.testing.assert_array_equal(back.model.crf.end_scores.numpy(), source.crf.end_scores.numpy())
