"""brightmart/albert_zh's own checkpoints (albert_tiny_zh, albert_base_zh, ...): their config
files, their names, their code's outputs, in and out again.

The reference is brightmart's code itself: tests/fixtures/brightmart_zh holds what their
modeling.py, run_pretraining heads and run_classifier (commit 52149e8) computed and saved under
tensorflow.compat.v1 (make_fixtures.py says how), for postln and preln.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

import reference_albert as ref
from fake_quant import check_tflite_int8
from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer, load_checkpoint
from albert_tf import save_tf1_checkpoint
from albert_tf.cli import convert
from albert_tf.config import ConfigError
from albert_tf.export.bundle import export_bundle
from albert_tf.export.encoder import export_tflite
from albert_tf.export.tflite import export_classifier_tflite, run_tflite, tflite_logits
from albert_tf.interop.checkpoints import CheckpointError
from albert_tf.interop.tf1_names import tf1_variable_map
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.summary import parameter_counts
from conftest import (BRIGHTMART_FIXTURES, ROOT, assert_moved_at_most,
                      brightmart_checkpoint_arrays, clue_dev_as_test, float32_atol)

LN_TYPES = ("postln", "preln")
BRIGHTMART_CONFIGS = ROOT / "configs" / "brightmart"
# brightmart's released files: (H, I, heads, L, ln_type).
RELEASED = {"tiny": (312, 1248, 12, 4, "postln"), "base": (768, 3072, 12, 12, "postln"),
            "large": (1024, 4096, 16, 24, "postln"), "xlarge": (2048, 8192, 32, 24, "postln"),
            "xxlarge": (4096, 16384, 64, 12, "preln")}


def fixture(ln_type):
  folder = BRIGHTMART_FIXTURES / ln_type
  config = AlbertConfig.from_json_file(folder / "albert_config.json")
  return folder, config, dict(np.load(folder / "outputs.npz"))


def encoder_inputs(outputs):
  return {"input_word_ids": outputs["input_ids"], "input_mask": outputs["input_mask"],
          "input_type_ids": outputs["segment_ids"]}


def model_names(arrays):
  return {n for n in arrays if n != "global_step" and not n.endswith(("/adam_m", "/adam_v"))}


def assert_float32_close(got, want, config):
  # Each value is the end of at most L blocks of sums of I terms (and H for attention).
  atol = float32_atol(want, config.num_hidden_layers * (config.intermediate_size
                                                       + config.hidden_size))
  np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=atol)


def brightmart_count(config, heads=False):
  """Parameters of brightmart's modeling.py for a config, counted from SPEC's shapes."""
  V, E, H, I = (config.vocab_size, config.embedding_size, config.hidden_size,
                config.intermediate_size)
  P, T = config.max_position_embeddings, config.type_vocab_size
  embeddings = V * E + E * H + (P + T) * H + 2 * H
  block = 4 * (H * H + H) + (H * I + I) + (I * H + H) + 2 * 2 * H
  total = embeddings + block + (H * H + H)
  if heads:
    total += (H * H + H) + 2 * H + V + (2 * H + 2)
  return total


@pytest.mark.parametrize("size", sorted(RELEASED))
def test_released_configs_select_the_brightmart_layout_and_count_its_parameters(size):
  config = AlbertConfig.from_json_file(BRIGHTMART_CONFIGS / f"albert_config_{size}.json")
  hidden, intermediate, heads, layers, ln_type = RELEASED[size]
  assert config.layout == "brightmart" and config.ln_type == ln_type
  assert (config.hidden_size, config.intermediate_size, config.num_attention_heads,
          config.num_hidden_layers, config.embedding_size, config.vocab_size) == (
              hidden, intermediate, heads, layers, 128, 21128)
  counts = parameter_counts(config)
  assert counts["encoder_total"] == brightmart_count(config)
  assert counts["pretrainer_total"] == brightmart_count(config, heads=True)
  # Their README: albert_tiny_zh has 4M parameters.
  if size == "tiny":
    assert round(counts["encoder_total"] / 1e6) == 4
    model = AlbertPretrainer(config)
    assert (model.encoder.count_params(), model.count_params()) == (
        counts["encoder_total"], counts["pretrainer_total"])


def test_config_keeps_brightmarts_keys_and_saves_the_layout(tmp_path):
  config = AlbertConfig.from_json_file(BRIGHTMART_CONFIGS / "albert_config_xxlarge.json")
  config.to_json_file(tmp_path / "albert_config.json")
  written = json.loads((tmp_path / "albert_config.json").read_text())
  released = json.loads((BRIGHTMART_CONFIGS / "albert_config_xxlarge.json").read_text())
  assert written == dict(released, layout="brightmart")
  assert AlbertConfig.from_json_file(tmp_path / "albert_config.json") == config
  with pytest.raises(ConfigError, match="num_hidden_groups.*layer_shared"):
    config.replace(num_hidden_groups=2)


@pytest.mark.parametrize("name", ["tiny_google", "small_google"])
def test_brightmarts_google_layout_releases_load_as_googles_layout(name, tmp_path):
  config = AlbertConfig.from_json_file(BRIGHTMART_CONFIGS / f"albert_config_{name}.json")
  assert config.layout == "google" and config.vocab_size == 21128
  cfg = config.to_dict()
  weights = ref.random_tf1_weights(cfg, heads=False, seed=4)
  prefix = str(tmp_path / "albert_model.ckpt")
  ref.write_tf1_checkpoint(prefix, weights, with_optimizer_slots=True)
  encoder = AlbertEncoder(config)
  report = load_checkpoint(encoder, prefix)
  assert report.missing == [] and report.unused == []
  ids = np.array([[2, 700, 6000, 21000, 3, 0, 0], [2, 5, 3, 88, 99, 4000, 3]], np.int32)
  mask = (ids > 0).astype(np.int32)
  mask[1] = 1
  types = np.array([[0] * 7, [0, 0, 0, 1, 1, 1, 1]], np.int32)
  out = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
  want = ref.reference_forward(weights, cfg, ids, mask, types)
  assert_float32_close(out["sequence_output"], want["sequence_output"], config)
  assert_float32_close(out["pooled_output"], want["pooled_output"], config)


@pytest.mark.parametrize("ln_type", LN_TYPES)
def test_pretrainer_gives_brightmarts_outputs_from_their_checkpoint(ln_type):
  folder, config, want = fixture(ln_type)
  model = AlbertPretrainer(config)
  report = load_checkpoint(model, str(folder / "albert_model.ckpt"))
  assert report.missing == [] and report.unused == []
  assert set(report.loaded) == model_names(brightmart_checkpoint_arrays(ln_type))
  out = model(dict(encoder_inputs(want), masked_lm_positions=want["masked_lm_positions"]))
  for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
    assert_float32_close(out[key], want[key], config)
  assert_float32_close(np.stack(out["encoder_outputs"]), want["all_encoder_layers"], config)


@pytest.mark.parametrize("ln_type", LN_TYPES)
def test_their_fine_tuned_classifier_loads_and_gives_their_logits(ln_type, tmp_path):
  folder, config, want = fixture(ln_type)
  model = AlbertClassifier(config, num_labels=3)
  report = load_checkpoint(model, str(folder / "classifier" / "model.ckpt"))
  assert report.missing == [] and report.unused == []
  # Their run_classifier adds a LayerNorm on the pooled output of pre-LN models.
  assert ("loss/LayerNorm/gamma" in report.loaded) == (ln_type == "preln")
  inputs = encoder_inputs(want)
  logits = model(inputs, training=False)
  assert_float32_close(logits, want["classifier_logits"], config)
  # ... and goes on to TFLite as it is.
  path = str(tmp_path / "classifier.tflite")
  export_classifier_tflite(model, path, want["input_ids"].shape[1])
  assert_float32_close(tflite_logits(path, **inputs), want["classifier_logits"], config)


@pytest.mark.parametrize("ln_type", LN_TYPES)
def test_tf1_names_out_are_brightmarts_and_round_trip_through_ours(ln_type, tmp_path):
  folder, config, _ = fixture(ln_type)
  theirs = brightmart_checkpoint_arrays(ln_type)
  # tf1 -> native (our checkpoint) -> tf1, with the command users run.
  config_file = str(folder / "albert_config.json")
  for source, fmt, out in ((folder / "albert_model.ckpt", "tf1", "native"),
                           (tmp_path / "native", "native", "tf1")):
    assert convert.main([f"--from={fmt}", f"--to={out}", f"--checkpoint={source}",
                         f"--albert_config_file={config_file}",
                         f"--output_dir={tmp_path / out}"]) == 0
  written = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / "tf1")))
  assert model_names(written.get_variable_to_shape_map()) == model_names(theirs)
  for name in model_names(theirs):
    np.testing.assert_array_equal(written.get_tensor(name), theirs[name], err_msg=name)
  # A classifier's names too, `loss/LayerNorm` included for pre-LN.
  classifier = AlbertClassifier(config, num_labels=3)
  load_checkpoint(classifier, str(folder / "classifier" / "model.ckpt"))
  prefix = save_tf1_checkpoint(classifier, str(tmp_path / "classifier" / "model.ckpt"))
  their_names = set(dict(tf.train.list_variables(str(folder / "classifier" / "model.ckpt"))))
  assert set(dict(tf.train.list_variables(prefix))) == their_names


def test_a_checkpoint_of_the_other_layout_is_refused_naming_both(tmp_path):
  folder, config, _ = fixture("postln")
  google_config = AlbertConfig.from_dict(
      {k: v for k, v in config.to_dict().items() if k not in ("layout", "ln_type")})
  assert google_config.layout == "google"
  google = AlbertPretrainer(google_config)
  before = [v.numpy() for v in google.weights]
  with pytest.raises(CheckpointError, match=r"brightmart/albert_zh's layout.*built with "
                                            r"Google's layout.*\"layout\": \"google\""):
    load_checkpoint(google, str(folder / "albert_model.ckpt"))
  assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, google.weights))
  prefix = str(tmp_path / "google.ckpt")
  save_tf1_checkpoint(google, prefix)
  with pytest.raises(CheckpointError, match=r"holds Google's layout.*built with brightmart.*"
                                            r"\"layout\": \"brightmart\""):
    load_checkpoint(AlbertPretrainer(config), prefix)


def test_huggingface_conversion_is_refused_with_the_reason(tmp_path, capsys):
  folder, _, _ = fixture("postln")
  code = convert.main(["--from=tf1", "--to=huggingface",
                       f"--checkpoint={folder / 'albert_model.ckpt'}",
                       f"--albert_config_file={folder / 'albert_config.json'}",
                       f"--output_dir={tmp_path / 'hf'}"])
  assert code != 0 and not (tmp_path / "hf").exists()
  message = capsys.readouterr().err
  assert "cannot express" in message and "albert_tiny_google_zh" in message


def test_export_bundle_of_albert_tiny_zh_serves_its_outputs(brightmart_tiny_zh, tmp_path):
  """export_savedmodel.py's bundle from the release layout: the encoder SavedModel gives the
  checkpoint's outputs and loads back as a start; the int8 TFLite encoder is its float32 twin
  quantized by the int8 scheme."""
  d = brightmart_tiny_zh
  paths = export_bundle(str(d / "albert_config_tiny.json"), str(d / "albert_model.ckpt"),
                        str(tmp_path / "exported"), vocab_file=str(d / "vocab.txt"),
                        max_seq_length=16, tflite_quantize=True)
  assert {"encoder", "preprocessing", "fill_mask", "tflite"} <= set(paths)
  config = AlbertConfig.from_json_file(d / "albert_config_tiny.json")
  model = AlbertPretrainer(config)
  load_checkpoint(model, str(d / "albert_model.ckpt"))
  x = {"input_word_ids": np.array([[2, 1045, 4638, 3, 0, 0]] * 2, np.int32),
       "input_mask": np.array([[1, 1, 1, 1, 0, 0]] * 2, np.int32),
       "input_type_ids": np.zeros([2, 6], np.int32)}
  want = model.encoder(x)
  served = tf.saved_model.load(paths["encoder"]).signatures["serving_default"](
      **{k: tf.constant(v) for k, v in x.items()})
  assert_float32_close(served["pooled_output"], want["pooled_output"].numpy(), config)
  again = AlbertPretrainer(config)
  # The encoder export carries the MLM head (for fill_mask), not the sentence-order head.
  assert load_checkpoint(again, paths["encoder"]).missing == [
      "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"]
  for name, variable in tf1_variable_map(model.encoder).items():
    np.testing.assert_array_equal(tf1_variable_map(again.encoder)[name].numpy(),
                                  variable.numpy(), err_msg=name)
  # encoder.tflite (int8) is its float32 twin, the model, quantized by tests/fake_quant.py's
  # reference: at hidden size 16 every kernel has under 1,024 weights and stays float32, and the
  # [21128, 8] word-embedding table, most of the file, is int8.
  padded = {k: np.pad(v[:1], [(0, 0), (0, 10)]) for k, v in x.items()}
  twin = str(tmp_path / "encoder-float32.tflite")
  export_tflite(paths["encoder"], twin, max_seq_length=16)
  assert_float32_close(run_tflite(twin, padded)["pooled_output"], want["pooled_output"][:1],
                       config)
  assert check_tflite_int8(paths["tflite"], twin, padded) == 0
  assert tf.io.gfile.stat(paths["tflite"]).length < 0.45 * tf.io.gfile.stat(twin).length


def test_run_race_starts_from_albert_tiny_zh(brightmart_tiny_zh, tmp_path):
  """Multiple choice (the users' CSV path of run_race) from brightmart's release."""
  from albert_tf.modeling.multiple_choice import AlbertMultipleChoice  # pylint: disable=g-import-not-at-top
  from albert_tf.cli.runs import run_race  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.race import RaceOptions  # pylint: disable=g-import-not-at-top
  rows = ["passage,question,a,b,answer",
          "今天北京下雨了。,北京天气怎么样,下雨,晴天,0",
          "他在上海工作。,他在哪里工作,北京,上海,1",
          "这本书很有意思。,这本书怎么样,有意思,没意思,0",
          "我们明天去公园。,我们什么时候去公园,今天,明天,1"]
  for split in ("train", "dev", "test"):
    (tmp_path / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
  d = brightmart_tiny_zh
  options = RaceOptions(
      task_name="csv", data_dir=str(tmp_path), output_dir=str(tmp_path / "out"),
      context_column="passage", question_column="question", option_columns=("a", "b"),
      label_column="answer", albert_config_file=str(d / "albert_config_tiny.json"),
      init_checkpoint=str(d / "albert_model.ckpt"), vocab_file=str(d / "vocab.txt"),
      max_seq_length=32, max_qa_length=16, train_batch_size=2, learning_rate=1e-4,
      train_step=2, warmup_step=0, save_checkpoints_steps=2, do_predict=True,
      log_every_seconds=0)
  results = run_race(options)
  # The test split is the dev one and step 2 the one checkpoint (the last evaluated and the
  # best the predictions come from): the dev accuracy is that of the written answers, exactly.
  written = [json.loads(line)["answer"] for line in
             (tmp_path / "out" / "test_predictions.jsonl").read_text("utf-8").splitlines()]
  answers = ["AB"[int(row.split(",")[-1])] for row in rows[1:]]
  assert results["questions"] == len(written) == 4
  assert results["accuracy"] == float(np.mean(np.array(written) == np.array(answers)))
  config = AlbertConfig.from_json_file(tmp_path / "out" / "albert_config.json")
  model = AlbertMultipleChoice(config).build_for()
  load_checkpoint(model, str(tmp_path / "out"))
  assert_moved_at_most(model, str(d / "albert_model.ckpt"),
                       ["bert/embeddings/word_embeddings_2", "bert/pooler/dense/kernel"], 1e-3)


def test_continued_pretraining_starts_from_albert_tiny_zh_with_both_heads(
    brightmart_tiny_zh, shared_data, tmp_path):
  from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data  # pylint: disable=g-import-not-at-top
  from albert_tf.cli.runs import run_pretraining  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.pretraining import PretrainingOptions  # pylint: disable=g-import-not-at-top
  d = brightmart_tiny_zh
  corpus = shared_data / "chinese" / "uer_clue_corpus_small" / "CLUECorpusSmall_bert_sampled.txt"
  lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)[:120]
  (tmp_path / "corpus.txt").write_text("".join(lines), encoding="utf-8")
  records = str(tmp_path / "train.tfrecord")
  create_pretraining_data([str(tmp_path / "corpus.txt")], [records], CreationOptions(
      vocab_file=str(d / "vocab.txt"), max_seq_length=32, max_predictions_per_seq=5,
      dupe_factor=1, num_workers=1))
  options = PretrainingOptions(
      albert_config_file=str(d / "albert_config_tiny.json"), input_file=records,
      output_dir=str(tmp_path / "out"), init_checkpoint=str(d / "albert_model.ckpt"),
      max_seq_length=32, max_predictions_per_seq=5, do_train=True, train_batch_size=8,
      num_train_steps=2, num_warmup_steps=0, learning_rate=1e-4, save_checkpoints_steps=2,
      iterations_per_loop=2, seed=3, log_every_seconds=0)
  run_pretraining(options)
  model = AlbertPretrainer(AlbertConfig.from_json_file(tmp_path / "out" / "albert_config.json"))
  load_checkpoint(model, str(tmp_path / "out"))
  assert_moved_at_most(model, str(d / "albert_model.ckpt"),
                       ["bert/embeddings/word_embeddings_2",
                        "cls/predictions/transform/dense/kernel", "cls/predictions/output_bias",
                        "cls/seq_relationship/output_weights"], 1e-3)


def test_their_fine_tuned_classifier_is_evaluated_exported_and_served_by_run_classifier(
    shared_data, tmp_path):
  """A preln classifier fine-tuned by their run_classifier: run_classifier evaluates it and
  writes the serving model without training; served, it gives their code's logits."""
  from albert_tf.cli.runs import run_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.classification import (ClassifierOptions)  # pylint: disable=g-import-not-at-top
  folder, config, want = fixture("preln")
  # A vocabulary of the fixture's 40 entries: the specials and 35 common characters.
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(
      "的是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而")
  assert len(vocab) == config.vocab_size
  (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
  # Their dev pairs are the test split too: the accuracy is that of the labels written.
  dev = clue_dev_as_test(shared_data / "chinese" / "clue" / "ocnli", tmp_path / "ocnli")
  results = run_classifier(ClassifierOptions(
      task_name="ocnli", data_dir=str(tmp_path / "ocnli"),
      output_dir=str(tmp_path / "out"), albert_config_file=str(folder / "albert_config.json"),
      init_checkpoint=str(folder / "classifier" / "model.ckpt"),
      vocab_file=str(tmp_path / "vocab.txt"), max_seq_length=32, do_train=False, do_eval=True,
      do_predict=True, eval_batch_size=512, predict_batch_size=512,
      export_dir=str(tmp_path / "serving"), log_every_seconds=0))
  assert results["global_step"] == 0
  written = [json.loads(line) for line in
             (tmp_path / "out" / "ocnli_predict.json").read_text("utf-8").splitlines()]
  assert [r["id"] for r in written] == [r["id"] for r in dev]
  assert results["accuracy"] == float(np.mean([w["label"] == r["label"]
                                               for w, r in zip(written, dev)]))
  served = tf.saved_model.load(str(tmp_path / "serving")).signatures["encoded"](
      **{k: tf.constant(v) for k, v in encoder_inputs(want).items()})
  assert_float32_close(served["logits"], want["classifier_logits"], config)
