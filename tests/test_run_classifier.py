"""run_classifier: GLUE and CLUE tasks on the real files, every output, starting points, bad
input."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, load_checkpoint, save_tf1_checkpoint
from albert_tf.cli import convert
from albert_tf.cli.runs import run_classifier
from albert_tf.export.encoder import export_encoder
from albert_tf.export.onnx import run_onnx
from albert_tf.export.tflite import export_classifier_tflite, tflite_logits
from albert_tf.interop import starts
from albert_tf.metrics.results import read_results
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tasks.classification import ClassifierOptions
from albert_tf.tasks.distillation import DistillOptions, Distiller
from albert_tf.training.best import BestCheckpoint
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA, assert_moved_at_most, clue_dev_as_test, float32_atol
from fake_quant import check_tflite_int8

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
GLUE = SHARED_DATA / "glue"
CLUE = SHARED_DATA / "chinese" / "clue"
ZH_VOCAB = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
  return tmp_path_factory.mktemp("features")


def opts(task, out, cache, **changes):
  base = dict(task_name=task, data_dir=str(GLUE / {"sst-2": "SST-2", "sts-b": "STS-B",
                                                   "cola": "CoLA"}.get(task, task)),
              output_dir=str(out), albert_config_file=str(ROOT / "configs" / "tiny.json"),
              spm_model_file=str(SPM), max_seq_length=32, do_train=True, do_eval=True,
              train_batch_size=16, eval_batch_size=128, predict_batch_size=128, train_step=6,
              save_checkpoints_steps=3, iterations_per_loop=3, learning_rate=1e-3,
              cached_dir=str(cache), seed=1, log_every_seconds=0)
  base.update(changes)
  return ClassifierOptions(**base)


def lines(path):
  return path.read_text().splitlines()


def test_real_data_sst2_writes_every_output(cache, tmp_path):
  # Exported as TF Serving's version 1 of a model "serving" (--export_version=auto).
  results = run_classifier(opts("sst-2", tmp_path, cache, do_predict=True,
                                export_dir=str(tmp_path / "models" / "serving"),
                                export_version="auto", tflite_quantize=True,
                                onnx=True))
  assert os.listdir(tmp_path / "models" / "serving") == ["1"]
  os.rename(tmp_path / "models" / "serving" / "1", tmp_path / "serving")
  serving = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"]
  assert serving(text_a=tf.constant(["a fine film"]))["label_names"].numpy()[0] in (b"0", b"1")
  # The export is a distillation teacher (ids -> logits) and has an int8 TFLite twin: both
  # compute the kept best checkpoint's model: the export is made from best/, as the original
  # exports model.ckpt-best.
  model = AlbertClassifier(AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json"), 2)
  load_checkpoint(model, BestCheckpoint(str(tmp_path), "accuracy").checkpoint_prefix())
  inputs = {"input_word_ids": tf.constant([[2, 48, 1340, 9, 3, 0], [2, 21, 3, 0, 0, 0]]),
            "input_mask": tf.constant([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]]),
            "input_type_ids": tf.zeros([2, 6], tf.int32)}
  teacher = Distiller(DistillOptions(teacher_export_dir=str(tmp_path / "serving")),
                      model.config, 2, False, None)
  teacher.build()
  expected = model(inputs, training=False).numpy()
  # As the TFLite twin's below: 2 layers' sums over I and H.
  np.testing.assert_allclose(teacher.teacher_outputs(inputs)[0].numpy(), expected, rtol=0,
                             atol=float32_atol(expected, 2 * (64 + 32)))
  # The int8 file is its float32 twin quantized by tests/fake_quant.py's reference, layer by
  # layer (the 2 layers' 6 kernels and the pooler), and the twin is the model.
  padded = {k: np.pad(v.numpy(), [(0, 0), (0, 26)]) for k, v in inputs.items()}
  twin = str(tmp_path / "classifier-float32.tflite")
  export_classifier_tflite(model, twin, 32)
  np.testing.assert_allclose(tflite_logits(twin, **padded), expected, rtol=0,
                             atol=float32_atol(expected, 2 * (64 + 32)))
  assert check_tflite_int8(str(tmp_path / "serving" / "classifier.tflite"), twin, padded) == 13
  # --onnx: classifier.onnx beside them gives the same logits at the request's own length.
  onnx_logits = run_onnx(str(tmp_path / "serving" / "classifier.onnx"),
                         {k: v.numpy() for k, v in inputs.items()})["logits"]
  np.testing.assert_allclose(onnx_logits, expected, rtol=0,
                             atol=float32_atol(expected, 2 * (64 + 32)))
  assert [l.split(" = ")[0] for l in lines(tmp_path / "eval_results.txt")] == [
      "accuracy", "global_step", "loss"]
  assert results["global_step"] == 6
  predictions = lines(tmp_path / "SST-2.tsv")
  assert predictions[0] == "index\tprediction" and len(predictions) == 1 + 1821
  assert {p.split("\t")[1] for p in predictions[1:]} <= {"0", "1"}
  best = lines(tmp_path / "best" / "best_results.txt")
  assert any(l.startswith("accuracy = ") for l in best)
  assert tf.train.load_checkpoint(tf.io.gfile.glob(str(tmp_path / "best" / "*.index"))[0][:-6])
  assert (cache / "sst-2_train_32.tf_record").exists()
  # The kept best checkpoint's dev accuracy is that of the labels it writes for the dev
  # sentences (given as the test file), against theirs, exactly: the same count over 872.
  data = tmp_path / "dev_as_test"
  data.mkdir()
  (data / "train.tsv").symlink_to(GLUE / "SST-2" / "train.tsv")
  (data / "dev.tsv").symlink_to(GLUE / "SST-2" / "dev.tsv")
  dev = [line.split("\t") for line in lines(GLUE / "SST-2" / "dev.tsv")[1:]]
  (data / "test.tsv").write_text("index\tsentence\n" + "".join(
      f"{i}\t{sentence}\n" for i, (sentence, _) in enumerate(dev)))
  run_classifier(opts("sst-2", tmp_path, cache, data_dir=str(data), do_train=False,
                      do_eval=False, do_predict=True))
  written = [line.split("\t") for line in lines(tmp_path / "SST-2.tsv")[1:]]
  assert [int(index) for index, _ in written] == list(range(len(dev)))
  accuracy = float(np.mean([p == label for (_, p), (_, label) in zip(written, dev)]))
  best = read_results(str(tmp_path / "best" / "best_results.txt"))
  assert accuracy == best["accuracy"]
  assert results["accuracy"] <= best["accuracy"]  # the last evaluation's: the best's or below


def test_real_data_stsb_is_regression_with_correlations(cache, tmp_path):
  results = run_classifier(opts("sts-b", tmp_path, cache, do_predict=True))
  assert {"pearson", "spearman", "corr", "loss"} <= set(results)
  rows = lines(tmp_path / "STS-B.tsv")[1:]
  assert len(rows) == 1379 and all(np.isfinite(float(r.split("\t")[1])) for r in rows)


def test_real_data_cola_reports_matthews_correlation_and_a_seed_repeats_the_run(cache,
                                                                                 tmp_path):
  results = run_classifier(opts("cola", tmp_path / "a", cache))
  assert "matthews_corr" in results and "accuracy" in results
  # --seed fixes the initial weights, dropout and shuffling: a second run ends the same.
  assert run_classifier(opts("cola", tmp_path / "b", cache)) == results


def test_real_data_starts_from_an_exported_encoder_or_a_huggingface_dir_converted_from_tf1(
    cache, tmp_path):
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  pretrained = AlbertPretrainer(config)
  tf1 = save_tf1_checkpoint(pretrained, str(tmp_path / "tf1" / "model.ckpt"))
  hub = export_encoder(pretrained, str(tmp_path / "hub"))
  hf = str(tmp_path / "hf")
  assert convert.main(["--from=tf1", "--to=huggingface", f"--checkpoint={tf1}",
                       f"--albert_config_file={ROOT / 'configs' / 'tiny.json'}",
                       f"--spm_model_file={SPM}", f"--output_dir={hf}"]) == 0
  # --init_checkpoint=<Hugging Face dir> alone: its config.json and spiece.model stand in for
  # --albert_config_file and --spm_model_file (the scripts' flag handling).
  from_hf = dict(init_checkpoint=hf, albert_config_file=None, spm_model_file=None,
                 vocab_file=None, do_lower_case=True)
  from_hf = starts.start_defaults(from_hf)
  assert from_hf["albert_config_file"] == f"{hf}/config.json"
  assert from_hf["spm_model_file"] == f"{hf}/spiece.model"
  # (The TF1 checkpoint is read by the conversion; run_classifier's own start from a TF1
  # checkpoint is the same load_checkpoint call, checked in test_model_fidelity.)
  for name, changes in (("from_hub", dict(albert_hub_module_handle=hub)),
                        ("from_hf", dict(from_hf, layerwise_lr_decay=0.8))):
    run_classifier(opts("sst-2", tmp_path / name, cache, train_step=3, do_eval=False,
                        **changes))
    reader = tf.train.load_checkpoint(str(tmp_path / name / "ckpt-3"))
    assert reader.has_tensor("head/output_weights/.ATTRIBUTES/VARIABLE_VALUE")
  # The Hugging Face start saved the run's config as the original's albert_config.json.
  assert AlbertConfig.from_json_file(tmp_path / "from_hf" / "albert_config.json").to_dict() == (
      AlbertConfig.from_json_file(hf + "/config.json").to_dict())


def test_bad_task_data_and_vocabulary_are_named(cache, tmp_path):
  with pytest.raises(ValueError, match="sst-3.*sst-2"):
    run_classifier(opts("sst-2", tmp_path, cache, task_name="sst-3"))
  with pytest.raises(FileNotFoundError, match="nowhere"):
    run_classifier(opts("sst-2", tmp_path, cache, data_dir=str(tmp_path / "nowhere"),
                        cached_dir=str(tmp_path / "c")))
  small = tmp_path / "small.json"
  AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json").replace(vocab_size=100) \
      .to_json_file(small)
  with pytest.raises(ValueError, match="30000 entries but .*vocab_size=100"):
    run_classifier(opts("sst-2", tmp_path, cache, albert_config_file=str(small)))


def test_cached_features_of_other_data_are_rebuilt_not_reused(cache, tmp_path):
  from albert_tf.tasks.classification import (ClassificationTask)  # pylint: disable=g-import-not-at-top
  ids = []
  for name, sentence in (("a", "a moving film"), ("b", "a dull and tiresome film")):
    data = tmp_path / name
    data.mkdir()
    (data / "dev.tsv").write_text(f"sentence\tlabel\n{sentence}\t1\n")
    runner = Run(ClassificationTask(opts("sst-2", tmp_path / "out", tmp_path / "cache",
                                   data_dir=str(data), do_train=False)))  # dev data only
    _, path = runner.task.records("dev")  # pylint: disable=protected-access
    record = next(iter(tf.data.TFRecordDataset(path)))
    ids.append(list(tf.train.Example.FromString(record.numpy()).features.feature[
        "input_ids"].int64_list.value))
  assert ids[0] != ids[1]  # same file name in the cache, other data: rebuilt


def test_real_data_ocnli_from_brightmarts_albert_tiny_zh_writes_a_clue_submission(
    cache, tmp_path, brightmart_tiny_zh):
  """Started as brightmart's users start: their release's config, checkpoint and vocab, and
  their way to say the length (--num_train_epochs: 3 steps of OCNLI's 3,000 at batch 16)."""
  d = brightmart_tiny_zh
  results = run_classifier(opts("ocnli", tmp_path, cache, data_dir=str(CLUE / "ocnli"),
                                albert_config_file=str(d / "albert_config_tiny.json"),
                                init_checkpoint=str(d / "albert_model.ckpt"),
                                spm_model_file=None, vocab_file=str(d / "vocab.txt"),
                                num_train_epochs=0.017, do_predict=True,
                                learning_rate=1e-4,
                                eval_batch_size=512, predict_batch_size=512))
  assert results["global_step"] == 3
  saved = AlbertConfig.from_json_file(tmp_path / "albert_config.json")
  assert saved.layout == "brightmart"
  # Trained from their weights (3 steps of lr 1e-4 move each by at most ~3e-4).
  model = AlbertClassifier(saved, 3)
  load_checkpoint(model, str(tmp_path))
  assert_moved_at_most(model, str(d / "albert_model.ckpt"),
                       ["bert/embeddings/word_embeddings_2",
                        "bert/encoder/layer_shared/output/LayerNorm/gamma"], 1e-3)
  test_ids = [json.loads(line)["id"] for line in
              (CLUE / "ocnli" / "test.json").read_text(encoding="utf-8").splitlines()]
  rows = [json.loads(line) for line in lines(tmp_path / "ocnli_predict.json")]
  assert [r["id"] for r in rows] == test_ids
  assert {r["label"] for r in rows} <= {"entailment", "neutral", "contradiction"}
  # The dev accuracy (step 3: the one checkpoint, the last evaluated and the best) is that
  # of the labels the run writes for the dev pairs, exactly.
  dev = clue_dev_as_test(CLUE / "ocnli", tmp_path / "dev_as_test")
  run_classifier(opts("ocnli", tmp_path, cache, data_dir=str(tmp_path / "dev_as_test"),
                      albert_config_file=str(d / "albert_config_tiny.json"),
                      spm_model_file=None, vocab_file=str(d / "vocab.txt"), do_train=False,
                      do_eval=False, do_predict=True, predict_batch_size=512))
  written = [json.loads(line) for line in lines(tmp_path / "ocnli_predict.json")]
  assert [r["id"] for r in written] == [r["id"] for r in dev]
  assert results["accuracy"] == float(np.mean([w["label"] == r["label"]
                                               for w, r in zip(written, dev)]))
  assert not (tmp_path / "OCNLI.tsv").exists()

