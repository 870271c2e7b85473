"""Checks `python -m albert_tf.cli.convert` against Hugging Face transformers itself (torch).

Not part of the test run: transformers and torch are not in requirements.txt. With a second
environment that has them (`pip install torch transformers sentencepiece safetensors`):

    .venv/bin/python benchmarks/transformers_crosscheck.py write /tmp/xcheck
    /path/to/torch-env/bin/python benchmarks/transformers_crosscheck.py transformers /tmp/xcheck
    .venv/bin/python benchmarks/transformers_crosscheck.py read /tmp/xcheck

`write` converts random tiny models of ours (pretraining, classifier, SQuAD v1, multiple choice,
token classification) to transformers directories and saves our outputs; `transformers` loads
them there, prints the largest output differences and the tokenizer's agreement, and saves
directories of its own; `read` loads those here and prints the differences. Results are quoted
in README.md.
"""

import json
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM = os.path.join(ROOT, os.pardir, "shared", "data", "sentencepiece", "spiece.model")
TEXTS = ["The quick brown fox jumped over the lazy dog.", "In 1990, prices rose 12,000 dollars.",
         "Héllo Wörld  café naïve", "He said ``hello'' to me", "  spaces   everywhere  ",
         "tab\tsep and\nnewline", "UPPER lower MiXeD", "emoji 😀 and symbols © ®", "a-b–c — d"]
LAYERS, GROUPS, INNER, BATCH, SEQ = 4, 2, 2, 2, 12
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _inputs():
  rng = np.random.default_rng(0)
  mask = np.ones((BATCH, SEQ), np.int32)
  mask[1, 8:] = 0
  ids = (rng.integers(5, 30000, (BATCH, SEQ)) * mask).astype(np.int32)
  types = ((np.arange(SEQ)[None] >= 5) * mask).astype(np.int32)
  return ids, mask, types


def _diff(a, b):
  return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def write(folder):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sys.path.insert(0, ROOT)
  from albert_tf import AlbertConfig, AlbertPretrainer, tokenization  # pylint: disable=g-import-not-at-top
  from albert_tf.cli import convert  # pylint: disable=g-import-not-at-top
  from albert_tf.interop.checkpoints import native_checkpoint  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.multiple_choice import AlbertMultipleChoice  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.squad import AlbertSquad  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.token_classifier import AlbertTokenClassifier  # pylint: disable=g-import-not-at-top
  shutil.rmtree(folder, ignore_errors=True)
  config = AlbertConfig.from_json_file(os.path.join(ROOT, "configs", "tiny.json")).replace(
      num_hidden_layers=LAYERS, num_hidden_groups=GROUPS, inner_group_num=INNER)
  ids, mask, types = _inputs()
  inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant(types)}
  every_position = tf.constant(np.tile(np.arange(SEQ), (BATCH, 1)).astype(np.int32))
  models = {"pretraining": AlbertPretrainer(config), "classifier": AlbertClassifier(config, 3),
            "squad": AlbertSquad(config), "race": AlbertMultipleChoice(config).build_for(),
            "ner": AlbertTokenClassifier(config, NER_LABELS)}
  results = {"ids": ids, "mask": mask, "types": types}
  for n, (name, model) in enumerate(models.items()):
    for i, variable in enumerate(model.variables):
      variable.assign(tf.random.stateless_normal(variable.shape, [n + 1, i]) * 0.3
                      + (1.0 if "gamma" in variable.name else 0.0))
    source = os.path.join(folder, name + "_native")
    tf.train.CheckpointManager(native_checkpoint(model), source, 1).save()
    config.to_json_file(os.path.join(source, "albert_config.json"))
    if name == "ner":  # as run_ner leaves it: the labels become config.json's id2label
      with open(os.path.join(source, "model_flags.json"), "w") as f:
        json.dump({"task_name": "ner", "labels": NER_LABELS, "use_crf": False}, f)
    extra = ["--head=multiple_choice"] if name == "race" else []
    assert convert.main(["--from=native", "--to=huggingface", f"--checkpoint={source}",
                         f"--spm_model_file={SPM}",
                         f"--output_dir={os.path.join(folder, name)}"] + extra) == 0
    if name == "pretraining":
      out = model(dict(inputs, masked_lm_positions=every_position), training=False)
      results.update(pretraining_mlm=out["mlm_logits"].numpy(),
                     pretraining_sop=out["sop_logits"].numpy(),
                     pretraining_seq=out["sequence_output"].numpy())
    elif name == "classifier":
      results["classifier"] = model(inputs, training=False).numpy()
    elif name == "squad":
      out = model(inputs, training=False)
      results.update(squad_start=out["start_logits"].numpy(), squad_end=out["end_logits"].numpy())
    elif name == "ner":  # every position a word: transformers' logits are per token
      results["ner"] = model(dict(inputs, word_positions=every_position), training=False).numpy()
    else:
      choices = {k: tf.stack([v, v[::-1]], 1) for k, v in inputs.items()}
      results["race"] = model(choices, training=False).numpy()
  tokenizer = tokenization.FullTokenizer(spm_model_file=SPM, do_lower_case=True)
  results["token_ids"] = np.array(json.dumps(
      [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in TEXTS]))
  np.savez(os.path.join(folder, "ours.npz"), **results)
  print("written", sorted(os.listdir(folder)))


def run_transformers(folder):
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  ours = np.load(os.path.join(folder, "ours.npz"))
  ids, mask, types = (torch.tensor(ours[k]).long() for k in ("ids", "mask", "types"))
  real = ours["mask"].astype(bool)
  kwargs = dict(input_ids=ids, attention_mask=mask, token_type_ids=types)
  print("transformers", transformers.__version__, "torch", torch.__version__)
  with torch.no_grad():
    m = transformers.AlbertForPreTraining.from_pretrained(os.path.join(folder, "pretraining"))
    out = m.eval()(**kwargs)
    print("pretraining mlm", _diff(out.prediction_logits, ours["pretraining_mlm"]),
          "sop", _diff(out.sop_logits, ours["pretraining_sop"]))
    m = transformers.AlbertForSequenceClassification.from_pretrained(
        os.path.join(folder, "classifier"))
    print("classifier", _diff(m.eval()(**kwargs).logits, ours["classifier"]))
    m = transformers.AlbertForQuestionAnswering.from_pretrained(os.path.join(folder, "squad"))
    out = m.eval()(**kwargs)
    print("squad start", _diff(out.start_logits.numpy()[real], ours["squad_start"][real]),
          "end", _diff(out.end_logits.numpy()[real], ours["squad_end"][real]))
    m = transformers.AlbertForMultipleChoice.from_pretrained(os.path.join(folder, "race"))
    choices = {k: torch.stack([v, v.flip(0)], 1) for k, v in kwargs.items()}
    print("multiple choice", _diff(m.eval()(**choices).logits, ours["race"]))
    m = transformers.AlbertForTokenClassification.from_pretrained(os.path.join(folder, "ner"))
    assert [m.config.id2label[i] for i in range(len(NER_LABELS))] == NER_LABELS
    print("token classification", _diff(m.eval()(**kwargs).logits, ours["ner"]))
    tokenizer = transformers.AlbertTokenizer.from_pretrained(os.path.join(folder, "pretraining"))
    for text, want in zip(TEXTS, json.loads(str(ours["token_ids"]))):
      got = tokenizer.encode(text, add_special_tokens=False)
      print("tokens", "same" if got == want else f"differ {got} vs ours {want}", repr(text))
    # Directories transformers writes, for `read`.
    config = transformers.AlbertConfig(
        vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=LAYERS,
        num_hidden_groups=GROUPS, inner_group_num=INNER, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64)
    theirs = {}
    torch.manual_seed(0)
    for name, cls in (("pretraining", transformers.AlbertForPreTraining),
                      ("classifier", transformers.AlbertForSequenceClassification),
                      ("squad", transformers.AlbertForQuestionAnswering),
                      ("base", transformers.AlbertModel),
                      ("ner", transformers.AlbertForTokenClassification)):
      if name == "ner":  # its tag names, which `read` finds again
        config.id2label = dict(enumerate(NER_LABELS))
        config.label2id = {label: i for i, label in enumerate(NER_LABELS)}
      m = cls(config).eval()
      for p in m.parameters():
        p.add_(torch.randn_like(p) * 0.1)
      m.save_pretrained(os.path.join(folder, "theirs", name))
      out = m(**kwargs)
      theirs.update({"pretraining": lambda o: {"pretraining_mlm": o.prediction_logits},
                     "classifier": lambda o: {"classifier": o.logits},
                     "squad": lambda o: {"squad_start": o.start_logits, "squad_end": o.end_logits},
                     "ner": lambda o: {"ner": o.logits},
                     "base": lambda o: {"base_seq": o.last_hidden_state}}[name](out))
    np.savez(os.path.join(folder, "theirs.npz"), **{k: v.numpy() for k, v in theirs.items()})


def read(folder):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sys.path.insert(0, ROOT)
  from albert_tf.interop import convert  # pylint: disable=g-import-not-at-top
  ours, theirs = np.load(os.path.join(folder, "ours.npz")), np.load(os.path.join(folder,
                                                                                "theirs.npz"))
  inputs = {"input_word_ids": tf.constant(ours["ids"]), "input_mask": tf.constant(ours["mask"]),
            "input_type_ids": tf.constant(ours["types"])}
  real = ours["mask"].astype(bool)
  for name in ("pretraining", "classifier", "squad", "ner", "base"):
    converted = convert.read("huggingface", os.path.join(folder, "theirs", name))
    model = converted.model
    if name == "pretraining":
      positions = tf.constant(np.tile(np.arange(SEQ), (BATCH, 1)).astype(np.int32))
      out = model(dict(inputs, masked_lm_positions=positions), training=False)
      print(name, _diff(out["mlm_logits"], theirs["pretraining_mlm"]))
    elif name == "squad":
      out = model(inputs, training=False)
      print(name, _diff(out["start_logits"].numpy()[real], theirs["squad_start"][real]),
            _diff(out["end_logits"].numpy()[real], theirs["squad_end"][real]))
    elif name == "classifier":
      print(name, _diff(model(inputs, training=False), theirs["classifier"]))
    elif name == "ner":
      assert converted.head == "token_classification" and converted.labels == NER_LABELS
      positions = tf.constant(np.tile(np.arange(SEQ), (BATCH, 1)).astype(np.int32))
      out = model(dict(inputs, word_positions=positions), training=False).numpy()
      print(name, _diff(out, theirs["ner"]))
    else:
      print(name, _diff(model(inputs, training=False)["sequence_output"], theirs["base_seq"]))


if __name__ == "__main__":
  step, where = sys.argv[1], sys.argv[2]
  {"write": write, "transformers": run_transformers, "read": read}[step](where)
