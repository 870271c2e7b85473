"""Task names -> processors: `get_processor("sst-2")`, `get_processor("csv", text_a_column=...)`."""

from albert_tf.data.classification.chinese import (AfqmcProcessor, ChnSentiCorpProcessor,
                                                   CmnliProcessor, CslProcessor, IflytekProcessor,
                                                   LcqmcProcessor, OcnliProcessor, TnewsProcessor)
from albert_tf.data.classification.csv_task import CsvProcessor
from albert_tf.data.classification.glue import (AxProcessor, ColaProcessor, MisMnliProcessor,
                                                MnliProcessor, MrpcProcessor, QnliProcessor,
                                                QqpProcessor, RteProcessor, Sst2Processor,
                                                StsbProcessor, WnliProcessor)
from albert_tf.data.classification.processor import DataProcessor


PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mnli-mm": MisMnliProcessor,
    "mismnli": MisMnliProcessor,  # the original run_classifier.py's name
    "mrpc": MrpcProcessor,
    "qnli": QnliProcessor,
    "qqp": QqpProcessor,
    "rte": RteProcessor,
    "sst-2": Sst2Processor,
    "sts-b": StsbProcessor,
    "wnli": WnliProcessor,
    "ax": AxProcessor,
    "afqmc": AfqmcProcessor,
    "tnews": TnewsProcessor,
    "iflytek": IflytekProcessor,
    "ocnli": OcnliProcessor,
    "cmnli": CmnliProcessor,
    "csl": CslProcessor,
    "lcqmc": LcqmcProcessor,
    "chnsenticorp": ChnSentiCorpProcessor,
    "csv": CsvProcessor,
}


def get_processor(task_name, **csv_options):
  """The processor of `task_name` (case-insensitive); `csv_options` go to CsvProcessor.

  A DataProcessor passes through unchanged, so callers may take a name or a processor.
  """
  if isinstance(task_name, DataProcessor):
    if csv_options:
      raise ValueError("csv options apply to a task name, not to a processor")
    return task_name
  key = str(task_name).strip().lower()
  if key not in PROCESSORS:
    raise ValueError(f"unknown task {task_name!r}; valid tasks: {', '.join(PROCESSORS)}")
  if key == "csv":
    if not csv_options.get("text_a_column"):
      raise ValueError("the csv task needs text_a_column, the header name of the text column")
    try:
      return CsvProcessor(**csv_options)
    except TypeError as e:
      raise ValueError(f"bad csv task options {sorted(csv_options)}: {e}") from e
  if csv_options:
    raise ValueError(f"options {sorted(csv_options)} apply only to the csv task, "
                     f"not to {key!r}")
  return PROCESSORS[key]()
