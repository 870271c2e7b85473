"""The ablation driver (benchmarks/ablations): its verdict rules, its variants, a toy study."""

import json
import math

import pytest

from benchmarks.ablations import claims, data, study, variants

COUNTS = {"sop_examples": 400, "nsp_examples": 400, "mlm_predictions": 4000,
          "sst2_dev": 872, "stsb_dev": 1500}


def _runs(metric, *values):
  return [{metric: v} for v in values]


def _claim(expect, metric="sop_accuracy"):
  return claims.Claim("a against b", metric, "a", "b", expect)


def test_the_noise_level_is_twice_the_larger_of_the_seed_and_the_sampling_error():
  # Two seeds each; the sampling error of one accuracy over 400 examples at p = 0.5 is 0.025,
  # of a two-seed mean 0.025 / sqrt(2), of the difference of two such means 0.025.
  a, b = _runs("sop_accuracy", 0.80, 0.82), _runs("sop_accuracy", 0.50, 0.52)
  assert claims.noise_level("sop_accuracy", a, b, COUNTS) == pytest.approx(0.05)
  # Seeds that disagree a lot: their standard error of the difference wins.
  a = _runs("sop_accuracy", 0.60, 0.90)
  seeds = math.sqrt(0.045 / 2 + 0.0002 / 2)
  assert claims.noise_level("sop_accuracy", a, b, COUNTS) == pytest.approx(2 * seeds)
  # Pearson's r: (1 - r^2) / sqrt(n - 1) per evaluation.
  a, b = _runs("stsb_pearson", 0.8), _runs("stsb_pearson", 0.6)
  own = math.hypot(0.36 / math.sqrt(1499), 0.64 / math.sqrt(1499))
  assert claims.noise_level("stsb_pearson", a, b, COUNTS) == pytest.approx(2 * own)


def test_verdicts_follow_the_sign_of_the_difference_against_the_noise():
  results = {"a": _runs("sop_accuracy", 0.80, 0.82), "b": _runs("sop_accuracy", 0.50, 0.52)}
  judged = claims.judge(_claim(">"), results, COUNTS)
  assert judged["difference"] == pytest.approx(0.30)
  assert judged["verdict"] == "agrees"
  assert claims.judge(_claim("~"), results, COUNTS)["verdict"] == "disagrees"
  assert claims.judge(_claim("<="), results, COUNTS)["verdict"] == "disagrees"
  swapped = {"a": results["b"], "b": results["a"]}
  assert claims.judge(_claim(">"), swapped, COUNTS)["verdict"] == "disagrees"
  assert claims.judge(_claim("<="), swapped, COUNTS)["verdict"] == "agrees"
  close = {"a": _runs("sop_accuracy", 0.53, 0.55), "b": results["b"]}  # +0.03 < 0.05
  assert claims.judge(_claim(">"), close, COUNTS)["verdict"] == "within noise"
  assert claims.judge(_claim("~"), close, COUNTS)["verdict"] == "agrees"
  spread = {"a": _runs("sop_accuracy", 0.60, 0.90), "b": results["b"]}  # +0.24 < 0.30
  assert claims.judge(_claim(">"), spread, COUNTS)["verdict"] == "within noise"
  assert claims.judge(_claim(">"), {"a": results["a"]}, COUNTS)["verdict"] == "not measured"


def test_above_chance_means_beating_the_majority_share_by_twice_the_sampling_error():
  counts = dict(COUNTS, sop_majority=0.51)  # 400 examples: error 0.025, of 2 seeds 0.0177
  assert claims.above_chance(_runs("sop_accuracy", 0.55, 0.56), "sop_accuracy", counts)
  assert not claims.above_chance(_runs("sop_accuracy", 0.53, 0.54), "sop_accuracy", counts)
  assert claims.above_chance(_runs("nsp_accuracy", 0.9), "nsp_accuracy", COUNTS) is None


def test_runs_at_the_sst2_majority_share_are_named_as_constant_predictions(tmp_path):
  dev = tmp_path / "dev.tsv"
  dev.write_text("sentence\tlabel\n" + "good\t1\n" * 5 + "bad\t0\n" * 3)
  assert data._majority_share(str(dev)) == 5 / 8
  counts = dict(COUNTS, sst2_majority=444 / 872)
  results = {"a": [{"seed": 1, "sst2_accuracy": 444 / 872}, {"seed": 2, "sst2_accuracy": 0.7}],
             "b": [{"seed": 1, "sst2_accuracy": 445 / 872}]}
  assert claims.majority_share_runs(results, counts) == [("a", 1)]
  assert claims.majority_share_runs(results, COUNTS) is None


def test_downstream_is_the_mean_of_sst2_and_stsb_with_both_sampling_errors():
  a = [{"sst2_accuracy": 0.9, "stsb_pearson": 0.7}]
  b = [{"sst2_accuracy": 0.8, "stsb_pearson": 0.6}]
  judged = claims.judge(_claim(">", "downstream"), {"a": a, "b": b}, COUNTS)
  assert judged["difference"] == pytest.approx(0.1)
  part = lambda r: math.hypot(math.sqrt(0.25 / 872), (1 - r["stsb_pearson"] ** 2)  # noqa: E731
                              / math.sqrt(1499)) / 2
  assert judged["noise"] == pytest.approx(2 * math.hypot(part(a[0]), part(b[0])))


def test_the_variants_are_the_papers_tables_at_the_small_scale():
  from albert_tf.modeling.summary import parameter_counts  # pylint: disable=import-outside-toplevel
  scale = variants.Scale()
  assert [v.name for v in variants.variants("sentence_task", scale)] == ["none", "nsp", "sop"]
  none, nsp, sop = variants.variants("sentence_task", scale)
  assert (none.sentence_loss_weight, nsp.data, sop.data) == (0.0, "nsp", "sop")
  sizes = {v.name: parameter_counts(variants.config_for(v, scale))["encoder_total"]
           for v in variants.variants("sharing", scale)}
  # Table 4's order: all-shared < shared-FFN < shared-attention < not-shared (FFN > attention).
  assert (sizes["all-shared"] < sizes["shared-FFN"] < sizes["shared-attention"]
          < sizes["not-shared"])
  embeddings = variants.variants("embedding_size", scale)
  assert sorted({v.embedding for v in embeddings}) == [scale.hidden // 8, scale.hidden // 4,
                                                       scale.hidden // 2, scale.hidden]
  assert {v.sharing for v in embeddings} == {"none", "all"}
  keys = {variants.run_key(v, scale, 1)
          for name in variants.STUDIES for v in variants.variants(name, scale)}
  # A variant that two studies share is one run: all-shared at the scale's E (sentence_task's
  # sop, sharing's all-shared, embedding_size's all-shared E/H=1/2) and not-shared at that E.
  assert scale.embedding == scale.hidden // 2
  assert len(keys) == 3 + 4 + 8 - 3


def test_the_held_out_documents_come_from_every_book_and_share_no_passage_with_training():
  """The eval split is a random eighth of all books' documents (not whole books: a random
  partner from the held-out book alone made eval NSP a harder task than the trained one)."""
  books = sorted(data.glob.glob(data.os.path.join(data.BOOKS, "*.txt")))
  book_of = {tuple(d): b for b in books for d in data._documents(b, 1.0, data.DOCUMENT_CHARS)}
  documents = data.corpus_documents("gutenberg", 1.0)
  train, held = data.split_documents(documents, seed=7)
  assert len(train) + len(held) == len(book_of) and abs(len(held) * 8 - len(book_of)) <= 8
  assert not {tuple(d) for d in train} & {tuple(d) for d in held}
  assert len({book_of[tuple(d)] for d in held}) == len(books)
  assert (train, held) == data.split_documents(documents, seed=7)  # seeded


def test_a_run_another_study_made_at_the_same_scale_and_data_is_taken_not_rerun():
  scale, data = {"steps": 1000}, {"train_sop": {"instances": 10}}
  run = {"run": "runs/sop-w1-all-E64-seed1", "sop_accuracy": 0.8}
  copy = dict(run, reused_from="sharing")
  results = {"sentence_task": {"scale": scale, "data": data, "variants": {"sop": [run]}},
             "embedding_size": {"scale": scale, "data": data, "variants": {"x": [copy]}}}
  assert study.shared_runs(results, "sharing", scale, data) == {run["run"]: ("sentence_task",
                                                                              run)}
  assert study.shared_runs(results, "sentence_task", scale, data) == {}  # its own: stage files
  assert study.shared_runs(results, "sharing", {"steps": 500}, data) == {}
  assert study.shared_runs(results, "sharing", scale, {"train_sop": {"instances": 9}}) == {}


def test_a_recorded_run_of_the_study_is_taken_only_when_its_folder_is_not_in_the_work_dir(
    tmp_path):
  scale, data = {"steps": 1000}, {"train_sop": {"instances": 10}}
  run = {"run": "runs/sop-seed1", "sop_accuracy": 0.8}
  results = {"sharing": {"scale": scale, "data": data, "variants": {"all-shared": [run]}}}
  assert study.recorded_runs(results, "sharing", scale, data, str(tmp_path)) == {
      "runs/sop-seed1": run}
  assert study.recorded_runs(results, "sharing", {"steps": 2}, data, str(tmp_path)) == {}
  (tmp_path / "runs" / "sop-seed1").mkdir(parents=True)  # there: it resumes from its stages
  assert study.recorded_runs(results, "sharing", scale, data, str(tmp_path)) == {}


def test_toy_study_writes_report_and_results_and_resumes_only_what_is_missing(tmp_path,
                                                                             monkeypatch):
  work, report = tmp_path / "work", tmp_path / "report"
  argv = ["--study", "sentence_task", "--toy", "--seeds", "1", "--work_dir", str(work),
          "--report_dir", str(report)]
  assert study.main(argv) == 0
  entry = json.loads((report / "results.json").read_text())["sentence_task"]
  assert list(entry["variants"]) == ["none", "nsp", "sop"]
  for name, (run,) in entry["variants"].items():
    for key in ("mlm_accuracy", "nsp_accuracy", "sop_accuracy", "sst2_accuracy"):
      assert 0.0 <= run[key] <= 1.0, (name, key)
    assert -1.0 <= run["stsb_pearson"] <= 1.0
    assert run["parameters"] > 0
    assert run["curve"][-1]["step"] == variants.TOY["steps"]
    assert "loss" in run["curve"][-1]
  expected = [c.text for c in claims.claims("sentence_task")]
  assert [c["text"] for c in entry["claims"]] == expected
  assert all(c["verdict"] in ("agrees", "disagrees", "within noise") for c in entry["claims"])
  text = (report / "REPORT.md").read_text()
  assert "| nsp |" in text and "| sop |" in text and entry["command"] in text
  assert 0.0 < entry["counts"]["sst2_majority"] < 1.0 and "majority share (" in text
  for png in entry["plots"]:
    assert f"]({png})" in text
    assert 1000 < (report / png).stat().st_size < 300_000

  # Again with one stage's result removed: only that stage runs; pretraining is not repeated.
  import albert_tf.cli.runs as runs  # pylint: disable=import-outside-toplevel
  calls = []
  real = runs.run_classifier

  def counted(options):
    calls.append(options.task_name)
    return real(options)

  def refused(options):
    raise AssertionError(f"pretraining ran again: {options.output_dir}")
  monkeypatch.setattr(runs, "run_classifier", counted)
  monkeypatch.setattr(runs, "run_pretraining", refused)
  sop = entry["variants"]["sop"][0]
  (work / sop["run"] / "sts-b.json").unlink()
  assert study.main(argv) == 0
  assert calls == ["sts-b"]
  again = json.loads((report / "results.json").read_text())["sentence_task"]
  assert again["variants"]["nsp"] == entry["variants"]["nsp"]
  assert -1.0 <= again["variants"]["sop"][0]["stsb_pearson"] <= 1.0

  # The report's form can be rebuilt from results.json alone.
  (report / "REPORT.md").unlink()
  assert study.main(["--report_only", "--report_dir", str(report)]) == 0
  assert "| sop |" in (report / "REPORT.md").read_text()


def test_the_driver_refuses_a_scale_that_cannot_run_under_its_own_flag_names(capsys):
  with pytest.raises(SystemExit):
    study.main(["--study", "sharing", "--steps", "0", "--hidden", "100", "--heads", "3",
                "--corpus_fraction", "1.5", "--finetune_learning_rate", "0", "--seeds", "0"])
  error = capsys.readouterr().err
  for expected in ("--steps=0: must be >= 1", "--hidden=100 is not divisible by --heads=3",
                   "--corpus_fraction=1.5: must be in (0, 1]",
                   "--finetune_learning_rate=0.0: must be > 0", "--seeds=0: must be >= 1"):
    assert expected in error, expected
  assert variants.Scale().problems() == [] and variants.Scale(**variants.TOY).problems() == []


def test_the_docstring_corpus_and_a_trained_vocabulary_are_named_in_the_run_key_and_checked():
  """The sentence-task study's corpus (issue 60): docstrings of two sentences or more, a
  SentencePiece model trained on the training split, and run keys that tell them apart."""
  documents = data.corpus_documents("docstrings", 0.1)
  assert len(documents) > 100 and all(len(d) >= 2 for d in documents)
  base, text = variants.Scale(), variants.Scale(corpus="docstrings", vocab=4000)
  sop = variants.variants("sentence_task", base)[2]
  assert variants.run_key(sop, base, 1) == "sop-w1-all-E64-H128-L4-s1500-b64-seq64-seed1"
  assert variants.run_key(sop, text, 1).endswith("-docstrings-v4000-seed1")
  assert variants.config_for(sop, text).vocab_size == 4000
  assert data.spm_model("/w", base) == data.SPM
  assert data.spm_model("/w", text) == "/w/data-docstrings-v4000/spm.model"
  assert variants.Scale(corpus="wiki", vocab=500).problems() == [
      "--corpus=wiki: must be one of gutenberg, docstrings",
      "--vocab=500: must be 0 (ALBERT's model) or at least 1000"]
