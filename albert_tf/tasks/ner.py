"""Named-entity recognition (token classification): the task of run_ner.py.

Data (data/ner.py): CoNLL column files (English CoNLL-2003, or one Chinese character per line as
MSRA / People's Daily / Weibo / Resume), CLUENER2020 JSON lines, or JSON lines of tokens + tags;
any of IOB1, BIO, BIOES, BMES, read into BIO. Each word is tagged at its first piece, long
sentences are cut into windows and merged back (data/ner_features.py). The head is a softmax
over the tags or, with `use_crf`, a CRF that never decodes an I-X after O or another type (the
softmax head's argmax may: its tags are scored as conlleval reads them, where such an I-X opens
an entity).

After every checkpoint (--do_eval) the dev file is scored by entity-level micro F1 (conlleval /
seqeval's default counting, ner_metrics.py) and the best checkpoint kept in output_dir/best;
`eval_results.txt` has precision, recall, f1, token_accuracy and each type's. `--do_predict`
writes the test file's predictions in its own format (`test_predictions.txt`: the input's lines
with the predicted tag appended; CLUENER: CLUE's `cluener_predict.json`) and `test_results.txt`
when the test file has tags. `--export_dir` writes a SavedModel that takes raw text and returns
its entities with character offsets (export/ner_serving.py), cutting the text into words as
the model was trained (`word_split`, kept in model_flags.json).
"""

import dataclasses
import json
import logging
import os

import tensorflow as tf

from albert_tf import files
from albert_tf.config import MODEL_FLAGS_NAME
from albert_tf.data import ner as ner_data
from albert_tf.data import ner_features
from albert_tf.data.batch_length import trim_batch
from albert_tf.data.ner_features import WORD_SPLITS
from albert_tf.jobs.option_fields import option, sequence_length, trim_batches
from albert_tf.metrics.ner import ner_results
from albert_tf.metrics.results import write_results
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.modeling.token_classifier import WORD_POSITIONS, AlbertTokenClassifier
from albert_tf.tasks.finetuning import FineTuningOptions, FineTuningTask
from albert_tf.training.options import check_options
from albert_tf.training.task import Serving

logger = logging.getLogger(__name__)

MODEL_INPUTS = INPUT_NAMES + (WORD_POSITIONS,)


@dataclasses.dataclass
class NerOptions(FineTuningOptions):
  """run_ner.py's flags (and the core's)."""
  data_format: str = option(
      "conll", "conll (column files), cluener (CLUENER2020 JSON lines) or jsonl "
      "({\"tokens\", \"tags\"} lines).", choices=ner_data.FORMATS)
  data_dir: str = option(None, "Folder with the format's train / dev / test files.")
  train_file: str = option(None, "Training file (default: in --data_dir).")
  dev_file: str = option(None, "Dev file (default: in --data_dir).")
  test_file: str = option(None, "Test file (default: in --data_dir).")
  tag_scheme: str = option(
      "auto", "Tag scheme of column / jsonl files (auto detects it per file).",
      choices=ner_data.SCHEMES)
  labels: tuple = option((), "The entity types or tags (default: the training file's).")
  use_crf: bool = option(
      False, "A CRF head (valid BIO transitions only) instead of a softmax per word.")
  dropout_prob: float = option(0.1, "Dropout on the sequence output.", bound="in [0, 1)")
  max_seq_length: int = sequence_length(128, "Pieces per window, all included.", at_least=3)
  doc_stride: int = option(64, "Pieces between the starts of a long sentence's windows.",
                           bound=">= 1")
  trim_batches: bool = trim_batches()
  do_train: bool = False
  do_eval: bool = option(False, "Evaluate on dev after each checkpoint; keep the best.")
  do_predict: bool = option(False, "Predict the test file (in its own format).")
  train_batch_size: int = 32
  eval_batch_size: int = option(8, "Eval batch.", bound=">= 1")
  learning_rate: float = 5e-5
  train_step: int = option(1000, "Training steps.", bound=">= 1")
  warmup_step: int = option(100, "Warm-up steps.", bound=">= 0")
  save_checkpoints_steps: int = 1000
  export_dir: str = option(
      None, "Write a raw-text serving SavedModel here (text -> entities with character "
      "offsets).")
  word_split: str = option(
      "auto", "How the export cuts raw text into words: at whitespace, or one per character "
      "(auto: the trained run's; characters for CLUENER or data of one-character words).",
      choices=("auto",) + WORD_SPLITS)


class NerTask(FineTuningTask):
  """Tagging words with entity types (BIO inside; the files' own schemes outside)."""

  best_metric = "f1"

  def __init__(self, options):
    o = self.options = options
    check_options(o)
    if o.data_format not in ner_data.FORMATS:
      raise ValueError(f"--data_format={o.data_format}: one of {', '.join(ner_data.FORMATS)}")
    if o.tag_scheme not in ner_data.SCHEMES:
      raise ValueError(f"--tag_scheme={o.tag_scheme}: one of {', '.join(ner_data.SCHEMES)}")
    if o.word_split not in ("auto",) + WORD_SPLITS:
      raise ValueError(f"--word_split={o.word_split}: one of auto, {', '.join(WORD_SPLITS)}")
    if (o.do_train or o.do_eval or o.do_predict) and not (
        o.data_dir or o.train_file or o.dev_file or o.test_file):
      raise ValueError("--data_dir or --train_file / --dev_file / --test_file is needed")
    self.labels, self.labels_source = self._labels()
    super().__init__(options, o.train_step, o.warmup_step)
    for split, flag in (("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict")):
      if getattr(o, flag):
        ner_data.check_labels(self.examples(split), self.labels, self.path(split),
                              self.labels_source)

  def path(self, split):
    o = self.options
    given = {"train": o.train_file, "dev": o.dev_file, "test": o.test_file}[split]
    return given or ner_data.default_file(o.data_format, o.data_dir, split)

  def read_examples(self, split):
    path = self.path(split)
    examples = ner_data.read_examples(self.options.data_format, path, self.options.tag_scheme)
    if not any(e.words for e in examples):
      raise ValueError(f"{path} holds no sentences")
    if split == "train" and any(e.tags is None for e in examples):
      raise ValueError(f"{path}: the training file has sentences without tags")
    return examples

  def _labels(self):
    """(the tag set, where it came from): --labels, else the one this output_dir trained with,
    else the training file's, else the dev / test file's. Names that are not BIO tags
    (LABEL_0 .. of a Hugging Face folder without `id2label`) are refused unless --labels
    names the outputs; --labels that contradict a trained model's tags are refused."""
    o = self.options
    saved = self._saved_flags().get("labels")
    saved_source = os.path.join(o.output_dir, MODEL_FLAGS_NAME)
    if o.labels:
      labels = ner_data.label_list([], given=list(o.labels))
      if saved and labels != saved and (ner_data.is_tag_set(saved) or len(saved) != len(labels)):
        raise ValueError(f"--labels={','.join(labels)} contradict the {len(saved)} labels "
                         f"{saved} of the model trained in {o.output_dir} ({saved_source}): "
                         "leave out --labels, or use another --output_dir")
      return labels, "--labels"
    if saved:
      ner_data.check_tag_set(saved, saved_source)
      return saved, saved_source
    for split, flag in (("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict")):
      if getattr(o, flag):
        examples = [e for e in self.examples(split) if e.tags is not None]
        if examples:
          return ner_data.label_list(examples), f"the {split} file's tags"
    raise ValueError("no tag set: give --labels, or a training or tagged dev file")

  def _saved_flags(self):
    """model_flags.json of the run trained in output_dir ({} when training, or if none)."""
    saved = os.path.join(self.options.output_dir, MODEL_FLAGS_NAME)
    if self.options.do_train or not tf.io.gfile.exists(saved):
      return {}
    with tf.io.gfile.GFile(saved) as f:
      return json.load(f)

  def word_split(self):
    """How raw text is cut into words for the export: --word_split, else the trained run's,
    else `characters` for CLUENER or data whose words are all one character, else
    `whitespace`. A --word_split that contradicts the trained run or the data is refused: a
    model trained on characters that is served whitespace-separated runs tags whole
    sentences as one word."""
    o = self.options
    saved = self._saved_flags().get("word_split")
    if o.word_split != "auto":
      if saved and saved != o.word_split:
        raise ValueError(
            f"--word_split={o.word_split} contradicts the model trained in {o.output_dir}, "
            f"whose words were cut by {saved} ({MODEL_FLAGS_NAME}): leave out --word_split")
      self._check_word_split(o.word_split)
      return o.word_split
    if saved:
      return saved
    if o.data_format == "cluener":
      return "characters"
    for split, flag in (("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict")):
      if getattr(o, flag):
        words = [w for e in self.examples(split) for w in e.words]
        return "characters" if words and all(len(w) == 1 for w in words) else "whitespace"
    logger.warning("No data to tell how the model's words were cut: the export splits text "
                   "at whitespace (give --word_split=characters for one word per character)")
    return "whitespace"

  def _check_word_split(self, word_split):
    """Refuses `word_split` when the run's data says otherwise: `characters` with a word of
    several characters, `whitespace` with only one-character words (per-character Chinese)."""
    o = self.options
    for split, flag in (("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict")):
      if not getattr(o, flag):
        continue
      examples = self.examples(split)
      if word_split == "characters":
        for example in examples:
          for i, word in enumerate(example.words):
            if len(word) > 1:
              raise ValueError(
                  f"--word_split=characters contradicts {self.path(split)}, line "
                  f"{example.line_of(i)}: its word {word!r} has {len(word)} characters, so the "
                  "model reads words, not characters; use --word_split=whitespace (or leave "
                  "it out)")
      elif all(len(w) == 1 for e in examples for w in e.words) and any(
          e.words for e in examples):
        raise ValueError(
            f"--word_split=whitespace contradicts {self.path(split)}: its words are all single "
            "characters, so the model reads one word per character, and the export would tag "
            "each whitespace-separated run of text (a whole Chinese sentence) as one word; use "
            "--word_split=characters (or leave it out)")

  def build_model(self):
    return AlbertTokenClassifier(self.config, self.labels, use_crf=self.options.use_crf,
                                 dropout_rate=self.options.dropout_prob)

  def model_flags(self):
    saved = self._saved_flags()
    labels = list(self.labels)
    if saved.get("labels") and not ner_data.is_tag_set(saved["labels"]):
      labels = saved["labels"]  # --labels names the outputs of a converted model: same model
    flags = {"task_name": "ner", "labels": labels, "use_crf": self.options.use_crf}
    if self.options.do_train or "word_split" in saved or not saved:
      flags["word_split"] = self.word_split()
    return flags

  def per_example_loss(self, model, batch):
    emissions = model({n: batch[n] for n in MODEL_INPUTS}, training=True)
    return model.word_loss(emissions, batch["label_ids"], batch["label_mask"])

  # --- data ---------------------------------------------------------------------------------
  def features(self, split):
    """(examples, windows, stacked window arrays) of a split (built in memory: NER files are
    small next to their pretraining corpora)."""
    cache = self.__dict__.setdefault("_features", {})
    if split not in cache:
      o = self.options
      examples = self.examples(split)
      windows, arrays = ner_features.convert_examples(examples, self.tokenizer, self.labels,
                                                      o.max_seq_length, o.doc_stride)
      logger.info("%s: %d sentences in %d windows of %d pieces", self.path(split),
                  len(examples), len(windows), o.max_seq_length)
      cache[split] = examples, windows, arrays
    return cache[split]

  def train_dataset(self):
    o = self.options
    _, windows, arrays = self.features("train")
    return self._trimmed(tf.data.Dataset.from_tensor_slices(arrays).shuffle(
        len(windows), seed=o.seed, reshuffle_each_iteration=True).repeat().batch(
            o.train_batch_size, drop_remainder=True))

  def _trimmed(self, batches):
    """`batches` with every window axis cut to the batch's longest window (rounded up) under
    --trim_batches: a window's words are at most its pieces, the loss and the CRF read only the
    words `label_mask` marks, and predictions keep only those."""
    o = self.options
    if not o.trim_batches:
      return batches
    return batches.map(lambda batch: trim_batch(batch, ner_features.FEATURE_NAMES,
                                                o.max_seq_length))

  # --- eval and predict ---------------------------------------------------------------------
  def predicted_tags(self, model, split, batch_size):
    """(examples, predicted BIO tags per example)."""
    examples, windows, arrays = self.features(split)
    dataset = self._trimmed(tf.data.Dataset.from_tensor_slices(arrays).batch(batch_size))

    # One trace for every batch length (the window axis is None in the spec when trimmed).
    @tf.function(input_signature=[dataset.element_spec])
    def step(batch):
      emissions = model({n: batch[n] for n in MODEL_INPUTS}, training=False)
      return model.predict_tags(emissions, batch["label_mask"])

    window_tags = []
    for batch in dataset:
      for tags, mask in zip(step(batch).numpy(), batch["label_mask"].numpy()):
        window_tags.append(tags[:int(mask.sum())])
    merged = ner_features.merge_windows(windows, window_tags, [len(e.words) for e in examples])
    return examples, [[self.labels[i] for i in tags] for tags in merged]

  def score(self, examples, predictions):
    """Entity scores and token accuracy of the tagged examples, counted on the tags in the
    file's own scheme, as written to the predictions file (BIO for CLUENER): what conlleval
    counts on that file. A softmax head's I-X after O is written as the entity it opens."""
    def as_written(tags, example):
      return ner_data.encode_spans(ner_data.tags_to_spans(tags), len(tags),
                                   example.scheme or "bio")
    tagged = [(e, p) for e, p in zip(examples, predictions) if e.tags is not None]
    if not tagged:
      return None
    gold = [as_written(e.tags, e) for e, _ in tagged]
    predicted = [as_written(p, e) for e, p in tagged]
    results = {"sentences": len(gold)}
    results.update(ner_results(gold, predicted))
    return results

  def evaluate(self, model, strategy):
    del strategy  # the dev set is tagged on the host
    examples, predictions = self.predicted_tags(model, "dev", self.options.eval_batch_size)
    results = self.score(examples, predictions)
    if results is None:
      raise ValueError(f"{self.path('dev')} has no tags to score")
    return results

  def predict(self, model, step):
    """The test file's predictions in its own format, and test_results.txt if it has tags."""
    o = self.options
    examples, predictions = self.predicted_tags(model, "test", o.predict_batch_size)
    if o.data_format == "cluener":
      target = os.path.join(o.output_dir, "cluener_predict.json")
      ner_data.write_cluener_predictions(target, examples, predictions)
    elif o.data_format == "conll":
      target = os.path.join(o.output_dir, "test_predictions.txt")
      ner_data.write_conll_predictions(target, self.path("test"), predictions, o.tag_scheme)
    else:
      target = os.path.join(o.output_dir, "test_predictions.jsonl")
      files.write_text(target, "".join(
          json.dumps({"id": e.guid, "tokens": e.words,
                      "tags": ner_data.encode_spans(ner_data.tags_to_spans(p), len(p),
                                                    e.scheme or "bio")},
                     ensure_ascii=False) + "\n" for e, p in zip(examples, predictions)))
    logger.info("Wrote the predictions of %d sentences to %s", len(examples), target)
    results = self.score(examples, predictions)
    if results is not None:
      write_results(os.path.join(o.output_dir, "test_results.txt"),
                    dict(results, global_step=step))
      logger.info("Test f1 %.4f over %d tagged sentences", results["f1"], results["sentences"])
    return predictions

  def serving(self):
    """A SavedModel that takes raw text and returns its entities with character offsets,
    cutting the text into words as the model was trained (`word_split`)."""
    o = self.options
    return Serving("ner", dict(self.vocabulary(), max_seq_length=o.max_seq_length,
                               doc_stride=o.doc_stride, word_split=self.word_split()))
