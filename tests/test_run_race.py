"""run_race: RACE's two layouts, the original's blank filling and truncation, users' multiple
choice, and a tiny model that learns real questions (predict, test results, serving)."""

import json
import shutil

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

import reference_tokenization as reference
from albert_tf import AlbertConfig, load_checkpoint, save_tf1_checkpoint
from albert_tf.cli.runs import run_race
from albert_tf.data import race as race_data
from albert_tf.export.tasks import export_task
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.tasks.race import RaceOptions, RaceTask
from albert_tf.tokenization import FullTokenizer
from albert_tf.training.run import Run
from conftest import ROOT, SHARED_DATA, float32_atol

# tiny.json's longest chain of additions behind a choice's logit: the E-term projection, per
# layer a sum over I and one over H, then the pooler's and the head's H.
TERMS = 16 + 2 * (64 + 32) + 2 * 32

SPM = SHARED_DATA / "sentencepiece" / "spiece.model"
RACE = SHARED_DATA / "race"


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(spm_model_file=str(SPM))


def test_real_data_both_layouts_give_the_same_questions_and_labels(tokenizer, tmp_path):
  release = race_data.read_race_examples(str(RACE), "dev", tokenizer)
  assert len(release) == 291  # 80 articles; the README's count
  assert [e.level for e in release].count("middle") == 150
  for level in ("middle", "high"):  # the original's all.txt: one article per line
    folder = tmp_path / "RACE" / "dev" / level
    folder.mkdir(parents=True)
    files = sorted((RACE / "RACE" / "dev" / level).glob("*.txt"),
                   key=lambda p: (len(p.name), p.name))
    (folder / "all.txt").write_text("".join(
        json.dumps(json.loads(f.read_text())) + "\n" for f in files))
  assert race_data.read_race_examples(str(tmp_path), "dev", tokenizer) == release
  high = race_data.read_race_examples(str(tmp_path), "dev", tokenizer, high_only=True)
  assert {e.level for e in high} == {"high"} and len(high) == 291 - 150
  article = json.loads((RACE / "RACE" / "dev" / "high" / files[0].name).read_text())
  first = next(e for e in high if e.example_id == article["id"])
  assert first.label == "ABCD".index(article["answers"][0])


def test_real_data_blank_filling_and_truncation_as_the_original(tokenizer):
  examples = race_data.read_race_examples(str(RACE), "train", tokenizer, middle_only=True)
  example = next(e for e in examples if e.example_id == "middle10.txt" and
                 e.question_index == 1)
  # "Robbie has a_day that day." with the options happy/scary/...: the option replaces the
  # "_" as it is (no space added: the original's str.replace), after preprocess_text.
  assert example.endings == ["robbie has ahappyday that day.", "robbie has ascaryday that day.",
                             "robbie has adangerousday that day.",
                             "robbie has aboringday that day."]
  assert example.label == 0  # answer "A"
  no_blank = next(e for e in examples if e.example_id == "middle10.txt" and
                  e.question_index == 0)
  assert no_blank.endings[0] == "what does robbie want to do on the rainy day? help his mother."
  # Packing, against the original's rules restated on the sentencepiece package alone: qa keeps
  # its LAST 8 pieces, the article its FIRST 64 - 3 - 8.
  sp = sentencepiece.SentencePieceProcessor(model_file=str(SPM))
  pieces = lambda text: reference.encode_pieces(sp, reference.preprocess_text(text, True))
  packed = race_data.convert_example(no_blank, tokenizer, 64, 8)
  qa = pieces(no_blank.endings[0])
  assert len(qa) > 8
  expected = ["[CLS]"] + pieces(no_blank.article)[:53] + ["[SEP]"] + qa[-8:] + ["[SEP]"]
  assert packed["tokens"][0] == expected
  assert packed["input_ids"][0] == [sp.piece_to_id(p) for p in expected]
  assert packed["segment_ids"][0] == [0] * 55 + [1] * 9
  assert packed["input_mask"][0] == [1] * 64


def test_users_multiple_choice_reads_labels_by_index_or_text(tokenizer, tmp_path):
  path = tmp_path / "train.csv"
  path.write_text("passage,question,a,b,c,answer\n"
                  'The sky is blue.,What colour is the sky?,red,blue,green,1\n'
                  'Cats purr.,Cats _.,bark,purr,fly,purr\n'
                  'x,y,p,q,r,\n')
  examples = race_data.read_csv_examples(str(path), "passage", "question", ["a", "b", "c"],
                                         "answer", tokenizer)
  assert [e.label for e in examples] == [1, 1, None]
  assert examples[1].endings == ["cats bark.", "cats purr.", "cats fly."]
  assert len(race_data.convert_example(examples[0], tokenizer, 16, 8)["input_ids"]) == 3
  (tmp_path / "dev.csv").write_text(path.read_text())
  options = RaceOptions(
      task_name="csv", data_dir=str(tmp_path), output_dir=str(tmp_path / "out"),
      context_column="passage", question_column="question", option_columns=("a", "b", "c"),
      label_column="answer", albert_config_file=str(ROOT / "configs" / "tiny.json"),
      spm_model_file=str(SPM), max_seq_length=16, max_qa_length=8, train_batch_size=2,
      train_step=2, warmup_step=0, save_checkpoints_steps=2, log_every_seconds=0)
  with pytest.raises(ValueError, match="1 training question.*have no answer"):
    run_race(options)
  path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))  # answered rows
  results = run_race(options)
  assert results["questions"] == 2 and 0 <= results["accuracy"] <= 1  # the unlabelled row
  assert json.loads((tmp_path / "out" / "model_flags.json").read_text())["num_choices"] == 3
  path.write_text("passage,question,a,b,answer\np,q,x,y,z\n")
  with pytest.raises(ValueError, match=r"train.csv, line 2: label 'z' is neither"):
    race_data.read_csv_examples(str(path), "passage", "question", ["a", "b"], "answer",
                                tokenizer)


def test_real_data_tiny_model_learns_questions_predicts_and_serves_them(tmp_path):
  data = tmp_path / "data"
  for split in ("train", "dev", "test"):  # 2 real articles, 8 questions, in every split
    folder = data / "RACE" / split / "middle"
    folder.mkdir(parents=True)
    for name in ("10.txt", "100.txt"):
      shutil.copy(RACE / "RACE" / "train" / "middle" / name, folder / name)
  options = RaceOptions(
      data_dir=str(data), output_dir=str(tmp_path / "out"),
      albert_config_file=str(ROOT / "configs" / "tiny.json"), spm_model_file=str(SPM),
      max_seq_length=64, max_qa_length=16, train_batch_size=4, eval_batch_size=8,
      predict_batch_size=8, learning_rate=2e-3, train_step=40, warmup_step=4,
      save_checkpoints_steps=40, iterations_per_loop=20, seed=2, log_every_seconds=0,
      do_predict=True, export_dir=str(tmp_path / "serving"))
  runner = Run(RaceTask(options))
  runner.loop.restore_or_initialize()
  before = runner.evaluate()
  history = []
  runner.train(history)
  after = runner.last_eval
  assert history[-1]["loss"] < history[0]["loss"] - 0.3
  assert after["accuracy"] > before["accuracy"] and after["accuracy"] >= 0.75
  assert set(after) >= {"accuracy", "accuracy_middle", "loss", "global_step"}
  assert (tmp_path / "out" / "best" / "best_results.txt").exists()
  probabilities = runner.predict()
  lines = [json.loads(l) for l in (tmp_path / "out" / "test_predictions.jsonl").read_text()
           .splitlines()]
  assert [(l["id"], l["question_index"]) for l in lines][:2] == [("middle10.txt", 0),
                                                                  ("middle10.txt", 1)]
  assert all(l["answer"] in "ABCD" and len(l["probabilities"]) == 4 for l in lines)
  assert "accuracy = " in (tmp_path / "out" / "test_results.txt").read_text()
  # The served model answers the raw articles as --do_predict did.
  export_task(runner.task, runner.loop.model)
  serve = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"]
  articles = [json.loads((data / "RACE" / "test" / "middle" / n).read_text())
              for n in ("10.txt", "100.txt")]
  rows = [(a["article"], q, o) for a in articles for q, o in zip(a["questions"], a["options"])]
  served = serve(article=tf.constant([r[0] for r in rows]),
                 question=tf.constant([r[1] for r in rows]),
                 options=tf.constant([r[2] for r in rows]))
  # The export against the run's predictions: TERMS, then the softmax over the 4 options.
  np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, rtol=0,
                             atol=float32_atol(probabilities, TERMS + 4))
  np.testing.assert_array_equal(served["answer_index"].numpy(), probabilities.argmax(-1))


def test_the_head_has_the_originals_tf1_names_and_round_trips(tmp_path):
  config = AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")
  source = AlbertMultipleChoice(config).build_for(4)
  path = save_tf1_checkpoint(source, str(tmp_path / "model.ckpt"))
  shapes = dict(tf.train.list_variables(path))
  assert shapes["output_weights"] == [1, config.hidden_size] and shapes["output_bias"] == [1]
  assert "bert/pooler/dense/kernel" in shapes
  target = AlbertMultipleChoice(config).build_for(4)
  load_checkpoint(target, path)
  inputs = {n: tf.constant([[[2, 30, 3, 0]] * 4]) for n in ("input_word_ids",)}
  inputs.update(input_mask=tf.constant([[[1, 1, 1, 0]] * 4]),
                input_type_ids=tf.zeros([1, 4, 4], tf.int32))
  want = source(inputs).numpy()
  np.testing.assert_allclose(target(inputs).numpy(), want, rtol=0, atol=float32_atol(want, TERMS))
