"""The studies' data: pretraining sets from the Gutenberg books, GLUE subsets, counts."""

import glob
import json
import os
import random
import re

from albert_tf import files
from albert_tf.metrics.majority import majority_share


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.normpath(os.path.join(REPO, os.pardir, "shared", "data"))
BOOKS = os.path.join(DATA, "corpus_en", "nltk_gutenberg")
SPM = os.path.join(DATA, "sentencepiece", "spiece.model")
GLUE = os.path.join(DATA, "glue")
# One document in this many (of all books, dealt at random) is held out for the evaluation: the
# eval set's random-document partners then come from many books, as the training set's do. Two
# held-out books made the eval NSP task harder than the trained one (a random partner from the
# same book shares its names and style) and its held-out accuracy near chance while the
# training batches' rose to 65%.
EVAL_EVERY = 8
TRAIN_FILES = 4
# A document: consecutive paragraphs of one book, at least this many characters (about 400
# pieces, several seq-64 instances), so that few chunks are a lone sentence (which the
# original pairs with a random document even in SOP data), as in the paper's long documents.
DOCUMENT_CHARS = 2000


def _documents(path, fraction, min_chars):
  """One book as documents: runs of consecutive paragraphs of at least `min_chars`, each a
  list of the book's lines. The lines (hard-wrapped at about 70 characters, some 15 pieces)
  are the "sentences": a seq-64 segment holds a few of them, where one of the books' long
  sentences would often fill a whole instance and leave a lone-sentence chunk."""
  with open(path, encoding="latin-1") as f:
    text = f.read()
  if fraction < 1.0:
    text = text[:text.rfind("\n", 0, int(len(text) * fraction)) + 1]
  documents, current, size = [], [], 0
  for paragraph in re.split(r"\n\s*\n", text):
    lines = [line.strip() for line in paragraph.splitlines() if line.strip()]
    if not lines:
      continue
    current.extend(lines)
    size += sum(len(line) for line in lines)
    if size >= min_chars:
      documents.append(current)
      current, size = [], 0
  if current:
    documents.append(current)
  return documents


def _docstring_documents(fraction):
  """The standard library's docstrings (the quickstart's corpus, about 1.6 MB), each a
  document of its sentences; those of fewer than two sentences are left out (no pair)."""
  from albert_tf.cli.quickstart import stdlib_docstrings, sentences  # pylint: disable=import-outside-toplevel
  documents = [s for s in map(sentences, stdlib_docstrings(10 ** 9)) if len(s) >= 2]
  return documents[:max(1, int(len(documents) * fraction))]


def corpus_documents(corpus, fraction):
  """The documents of `corpus` ("gutenberg" or "docstrings"), each a list of sentences."""
  if corpus == "docstrings":
    return _docstring_documents(fraction)
  books = sorted(glob.glob(os.path.join(BOOKS, "*.txt")))
  return [d for book in books for d in _documents(book, fraction, DOCUMENT_CHARS)]


def split_documents(documents, seed, eval_every=EVAL_EVERY):
  """(train, eval) documents: `documents` in a seeded random order, every `eval_every`-th of
  them held out, so both splits mix all books (or modules) and share no passage."""
  documents = list(documents)
  random.Random(seed).shuffle(documents)
  held = set(range(0, len(documents), eval_every))
  return ([d for i, d in enumerate(documents) if i not in held],
          [d for i, d in enumerate(documents) if i in held])


def write_corpus(documents, directory, num_files):
  """`documents` (already in a random order) dealt into `num_files` UTF-8 files, one sentence a
  line and a blank line after each document."""
  os.makedirs(directory, exist_ok=True)
  paths = []
  for i in range(num_files):
    path = os.path.join(directory, f"part-{i}.txt")
    files.write_text(path, "".join("\n".join(document) + "\n\n"
                                        for document in documents[i::num_files]))
    paths.append(path)
  return paths


def data_dir(work, scale):
  """The folder of a corpus's text, SentencePiece model and pretraining sets."""
  if (scale.corpus, scale.vocab) == ("gutenberg", 0):
    return os.path.join(work, "data")  # the first studies' folder
  return os.path.join(work, f"data-{scale.corpus}-v{scale.vocab or 30000}")


def spm_model(work, scale):
  """The SentencePiece model of the scale: ALBERT's, or one trained on the training split."""
  return SPM if not scale.vocab else os.path.join(data_dir(work, scale), "spm.model")


def prepare_data(work, scale):
  """{name: shard glob} of the four pretraining sets (made once per work dir)."""
  from albert_tf.data.pretraining.create import CreationOptions, create_pretraining_data  # pylint: disable=import-outside-toplevel
  from albert_tf.tokenization.train_spm import train_sentencepiece  # pylint: disable=import-outside-toplevel
  train, held_out = split_documents(corpus_documents(scale.corpus, scale.corpus_fraction),
                                    seed=7)
  data = data_dir(work, scale)
  spm = spm_model(work, scale)
  sets = {}
  for split, documents, count in (("train", train, TRAIN_FILES), ("eval", held_out, 1)):
    inputs = write_corpus(documents, os.path.join(data, f"{split}_text"), count)
    if split == "train" and scale.vocab and not os.path.exists(spm):
      # Lower-cased as ALBERT's English model is; trained on the training split alone.
      train_sentencepiece(inputs, spm[:-len(".model")], scale.vocab, do_lower_case=True,
                          log=lambda *a: None)
    for style in ("sop", "nsp"):
      name = f"{split}_{style}"
      shards = [os.path.join(data, f"{name}-{i}.tfrecord") for i in range(2)]
      sets[name] = os.path.join(data, f"{name}-*.tfrecord")
      if os.path.exists(os.path.join(data, f"{name}.json")):
        continue
      create_pretraining_data(inputs, shards, CreationOptions(
          spm_model_file=spm, max_seq_length=scale.seq,
          max_predictions_per_seq=scale.max_predictions,
          dupe_factor=scale.dupe_factor if split == "train" else 1,
          random_next_sentence=style == "nsp", random_seed=11 if split == "train" else 12,
          # SOP accuracy is measured on order swaps alone: the original's rule pairs a lone
          # sentence chunk with a random document even in SOP data, which an NSP model solves.
          pure_sop=style == "sop" and split == "eval",
          num_workers=1), metadata_file=os.path.join(data, f"{name}.json"))
  return sets


def prepare_glue(work, scale):
  """{task: data_dir} for SST-2 and STS-B, subsets as the scale asks."""
  tasks = {}
  for task, folder, train_n in (("sst-2", "SST-2", scale.sst2_train_examples),
                                ("sts-b", "STS-B", scale.stsb_train_examples)):
    target = os.path.join(work, "glue", folder)
    os.makedirs(target, exist_ok=True)
    for split, n in (("train", train_n), ("dev", scale.dev_examples)):
      path = os.path.join(target, f"{split}.tsv")
      if os.path.exists(path):
        continue
      with open(os.path.join(GLUE, folder, f"{split}.tsv"), encoding="utf-8") as f:
        lines = f.readlines()
      kept = lines if not n else lines[:1 + n]  # the header and the first n examples
      files.write_text(path, "".join(kept))
    tasks[task] = target
  return tasks


def _count_lines(path):
  with open(path, encoding="utf-8") as f:
    return sum(1 for _ in f) - 1


def _majority_share(path):
  """The most common label's share of a GLUE TSV whose last column is the label."""
  with open(path, encoding="utf-8") as f:
    labels = [line.rstrip("\n").split("\t")[-1] for line in list(f)[1:] if line.strip()]
  return majority_share(labels)


def data_summary(sets):
  """{set: {instances, random_partner share, label-1 share}} from the sets' metadata."""
  summary = {}
  for name, pattern in sorted(sets.items()):
    with open(pattern.replace("-*.tfrecord", ".json"), encoding="utf-8") as f:
      m = json.load(f)
    n, stats = m["total_instances"], m["statistics"]
    summary[name] = {"instances": n,
                     "random_partner": stats.get("random_partner", 0) / max(n, 1),
                     "label_1": stats.get("sentence_order_label_1", 0) / max(n, 1),
                     "pure_sop": bool(m["flags"].get("pure_sop"))}
  return summary


def evaluation_counts(sets, glue, scale):
  """How many examples each metric was measured on (for the sampling errors)."""
  def instances(pattern):
    meta = glob.glob(pattern.replace("-*.tfrecord", ".json"))[0]
    with open(meta, encoding="utf-8") as f:
      m = json.load(f)
    ones = m["statistics"].get("sentence_order_label_1", 0) / max(m["total_instances"], 1)
    return (m["total_instances"], m["statistics"].get("masked_lm_predictions", 0),
            max(ones, 1 - ones))
  sop_n, sop_predictions, sop_majority = instances(sets["eval_sop"])
  nsp_n, _, nsp_majority = instances(sets["eval_nsp"])
  evaluated = scale.eval_batches * scale.eval_batch
  sop_used, nsp_used = min(sop_n, evaluated), min(nsp_n, evaluated)
  return {"sop_examples": sop_used, "nsp_examples": nsp_used,
          "sop_majority": sop_majority, "nsp_majority": nsp_majority,
          "mlm_predictions": int(sop_predictions * sop_used / max(sop_n, 1)),
          "sst2_dev": _count_lines(os.path.join(glue["sst-2"], "dev.tsv")),
          "sst2_majority": _majority_share(os.path.join(glue["sst-2"], "dev.tsv")),
          "stsb_dev": _count_lines(os.path.join(glue["sts-b"], "dev.tsv"))}
