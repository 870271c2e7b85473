"""The SQuAD metric: EM and F1 (0-100) through tf-models-official's official evaluators.

    dataset = load_squad_json("dev-v2.0.json")   # data/squad.py
    scored, skipped = scored_questions(dataset, version_2=True)
    evaluate(scored, predictions, null_odds)      # v1.1: evaluate(scored, predictions)

v2.0's result includes the evaluator's search over null-odds thresholds (`best_f1_thresh`),
which run_squad uses, as the original, to decide its written predictions.
"""


def scored_questions(dataset, version_2=False):
  """(the dataset cut to the questions the official evaluators can score, ids of the others).

  A question is scored when it has answers, or (v2.0) when it is unanswerable
  (`is_impossible`; a missing `answers` becomes []). The others are left out: v1.1's
  evaluator fails on a question without answers (a max over no gold answers), and v2.0's
  would count an answerable question without answers as unanswerable.
  """
  kept, skipped = [], []
  for article in dataset:
    paragraphs = []
    for paragraph in article.get("paragraphs", []):
      qas = []
      for qa in paragraph["qas"]:
        if qa.get("answers"):
          qas.append(qa)
        elif version_2 and qa.get("is_impossible"):
          qas.append({**qa, "answers": []})
        else:
          skipped.append(qa["id"])
      if qas:
        paragraphs.append({**paragraph, "qas": qas})
    if paragraphs:
      kept.append({**article, "paragraphs": paragraphs})
  return kept, skipped


def evaluate(dataset, predictions, null_odds=None):
  """EM and F1 (0-100) from tf-models-official's official SQuAD evaluators.

  v1.1 (no `null_odds`): {"exact_match", "f1"}. v2.0: the evaluator's dict ("exact", "f1",
  "HasAns_*", "NoAns_*", and "best_exact"/"best_f1" with their thresholds, the search over
  null-odds thresholds; Model Garden names these "final_*").
  """
  if null_odds is None:
    from official.nlp.tools import squad_evaluate_v1_1  # pylint: disable=g-import-not-at-top
    result = squad_evaluate_v1_1.evaluate(dataset, predictions)
    return {"exact_match": 100.0 * result["exact_match"], "f1": 100.0 * result["final_f1"]}
  from official.nlp.tools import squad_evaluate_v2_0  # pylint: disable=g-import-not-at-top
  # The evaluator scores the dataset's questions but searches thresholds over every null
  # odd it is given: keep those of the dataset's questions.
  ids = {qa["id"] for article in dataset for p in article["paragraphs"] for qa in p["qas"]}
  null_odds = {k: v for k, v in null_odds.items() if k in ids}
  result = dict(squad_evaluate_v2_0.evaluate(dataset, predictions, null_odds))
  renamed = {}
  for key, value in result.items():
    if key.startswith("final_"):
      key = "best_" + key[len("final_"):]
    renamed[key] = float(value)  # every value is a number: Python floats for JSON
  return renamed
