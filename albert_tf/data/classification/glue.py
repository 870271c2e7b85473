"""The GLUE processors: the original's files, columns, labels and guids, one class a task.

Each describes its splits (`Split`) for the reading of `DataProcessor`; `data_dir` is the task's
folder or, as in the original, the GLUE root that holds it. Test guids are the rows' `index`,
which the submission file (`submissions.write_glue_predictions`) needs. See SPEC.md,
"Fine-tuning (original defaults)".
"""

from albert_tf.data.classification.processor import DataProcessor, Split


MNLI_LABELS = ("contradiction", "entailment", "neutral")


class ColaProcessor(DataProcessor):
  """CoLA: is a sentence acceptable (1) or not (0)? GLUE's files or the official release.

  GLUE's train.tsv/dev.tsv are the official in_domain_train.tsv and in_domain_dev.tsv +
  out_of_domain_dev.tsv: no header; columns source, label, original mark, sentence.
  """
  name = "cola"
  folders = ("CoLA",)
  labels = ("0", "1")
  metric_names = ("matthews_corr", "accuracy")
  splits = {
      "train": Split(files=(("train.tsv",), ("in_domain_train.tsv",)),
                     header=False, text_a=3, label=1),
      "dev": Split(files=(("dev.tsv",), ("in_domain_dev.tsv", "out_of_domain_dev.tsv")),
                   header=False, text_a=3, label=1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1),
  }


class MnliProcessor(DataProcessor):
  """MNLI, dev = the matched set (genres seen in training)."""
  name = "mnli"
  folders = ("MNLI",)
  labels = MNLI_LABELS
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=8, text_b=9, label=-1),
      "dev": Split(files=(("dev_matched.tsv",),), guid=0, text_a=8, text_b=9, label=-1),
      "test": Split(files=(("test_matched.tsv",),), guid=0, text_a=8, text_b=9),
  }


class MisMnliProcessor(MnliProcessor):
  """MNLI with the mismatched dev and test sets (genres unseen in training)."""
  name = "mnli-mm"
  splits = {
      "train": MnliProcessor.splits["train"],
      "dev": Split(files=(("dev_mismatched.tsv",),), guid=0, text_a=8, text_b=9, label=-1),
      "test": Split(files=(("test_mismatched.tsv",),), guid=0, text_a=8, text_b=9),
  }


class MrpcProcessor(DataProcessor):
  """MRPC: are two sentences paraphrases? Columns Quality, #1 ID, #2 ID, #1 String, #2 String."""
  name = "mrpc"
  folders = ("MRPC",)
  labels = ("0", "1")
  metric_names = ("f1", "accuracy")
  splits = {
      "train": Split(files=(("train.tsv",),), text_a=3, text_b=4, label=0),
      "dev": Split(files=(("dev.tsv",),), text_a=3, text_b=4, label=0),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=3, text_b=4),
  }


class QnliProcessor(DataProcessor):
  """QNLI: does the sentence answer the question? Columns index, question, sentence, label."""
  name = "qnli"
  folders = ("QNLI",)
  labels = ("entailment", "not_entailment")
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=1, text_b=2, label=-1),
      "dev": Split(files=(("dev.tsv",),), guid=0, text_a=1, text_b=2, label=-1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1, text_b=2),
  }


class QqpProcessor(DataProcessor):
  """QQP: are two questions duplicates? Columns id, qid1, qid2, question1, question2, label."""
  name = "qqp"
  folders = ("QQP",)
  labels = ("0", "1")
  metric_names = ("f1", "accuracy")
  skip_malformed_rows = True  # the original's `except IndexError: continue`
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=3, text_b=4, label=5),
      "dev": Split(files=(("dev.tsv",),), guid=0, text_a=3, text_b=4, label=5),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1, text_b=2),
  }


class RteProcessor(QnliProcessor):
  """RTE: does sentence1 entail sentence2? Columns index, sentence1, sentence2, label."""
  name = "rte"
  folders = ("RTE",)


class Sst2Processor(DataProcessor):
  """SST-2: is a movie-review phrase positive (1) or negative (0)? Columns sentence, label."""
  name = "sst-2"
  folders = ("SST-2",)
  labels = ("0", "1")
  splits = {
      "train": Split(files=(("train.tsv",),), text_a=0, label=1),
      "dev": Split(files=(("dev.tsv",),), text_a=0, label=1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=1),
  }


class StsbProcessor(DataProcessor):
  """STS-B: similarity score 0-5 of a sentence pair (regression); 10 columns, score last."""
  name = "sts-b"
  folders = ("STS-B",)
  labels = None
  score_range = (0.0, 5.0)
  metric_names = ("pearson", "spearman", "corr")
  splits = {
      "train": Split(files=(("train.tsv",),), guid=0, text_a=7, text_b=8, label=-1),
      "dev": Split(files=(("dev.tsv",),), guid=0, text_a=7, text_b=8, label=-1),
      "test": Split(files=(("test.tsv",),), guid=0, text_a=7, text_b=8),
  }


class WnliProcessor(QnliProcessor):
  """WNLI: does sentence2 follow from sentence1 (1) or not (0)? RTE's columns."""
  name = "wnli"
  folders = ("WNLI",)
  labels = ("0", "1")


class AxProcessor(DataProcessor):
  """GLUE's diagnostic set: test only, scored by GLUE with MNLI's labels (R3 = Matthews corr.)."""
  name = "ax"
  folders = ("AX", "diagnostic")
  labels = MNLI_LABELS
  metric_names = ("matthews_corr",)
  splits = {
      "test": Split(files=(("test.tsv",), ("diagnostic.tsv",), ("AX.tsv",)),
                    guid=0, text_a=1, text_b=2),
  }
