"""create_pretraining_data: text files -> SOP instances with n-gram masks -> sharded TFRecords.

Streaming and parallel, with the original's statistics (SPEC.md "Instance creation"):
- the reader streams documents (blank line = end of document; a file's end ends one too) and
  groups them into blocks of about `block_bytes` of text, so memory is bounded by a few blocks
  whatever the corpus size;
- each block is tokenized and turned into instances by a worker process: documents draw their
  random-document partners from their own block, every random choice comes from an RNG seeded
  by (random_seed, block, dupe pass, document), and the block's instances are shuffled with
  their own seeded RNG — so the output is the same for any number of workers;
- with `word_segmentation="jieba"` (WordPiece only) each line is also segmented with jieba,
  once for all dupe passes, so Chinese words are masked whole (`chinese.py`);
- results are written in block order, round-robin across shards, under temporary names that
  are renamed into place only when everything succeeded, followed by a JSON of counts and flags
  (`statistics.dropped_tokens`: the documents' tokens that none of their instances holds,
  over all dupe passes; most are cut by truncation to max_seq_length - 3);
- SIGTERM or SIGINT (Ctrl-C) stops the workers at once and removes the temporary shards
  (`Interrupted` / KeyboardInterrupt); a rerun removes those of a run that was killed outright.
"""

import collections
import dataclasses
import glob
import json
import logging
import multiprocessing
import os
import random
import signal
import time

from albert_tf import files
from albert_tf import tokenization
from albert_tf.data import tfrecords
from albert_tf.data.pretraining import records
from albert_tf.data.pretraining.instances import InstanceOptions, create_instances
from albert_tf.data.pretraining.masking import (MaskingOptions, continued_word_start,
                                                mark_continued, num_to_predict)
from albert_tf.jobs import signals
from albert_tf.jobs.option_fields import option, sequence_length

logger = logging.getLogger(__name__)

METADATA_FORMAT = "albert-tf pretraining data v1"
WORD_SEGMENTATIONS = ("none", "jieba")


@dataclasses.dataclass(frozen=True)
class CreationOptions:
  """The original script's flags (same names and defaults) plus ours; `validate` refuses the
  values that cannot mean anything."""
  spm_model_file: str = option(None, "SentencePiece model.")
  vocab_file: str = option(None, "WordPiece vocab.txt (when no --spm_model_file).")
  do_lower_case: bool = option(True, "Lowercase the input text.")
  max_seq_length: int = sequence_length(
      512, "Maximum sequence length (at least 5: [CLS] A [SEP] B [SEP]).")
  max_predictions_per_seq: int = option(20, "Maximum masked LM predictions per sequence.")
  masked_lm_prob: float = option(0.15, "Masked LM probability.")
  dupe_factor: int = option(40, "Passes over the input, each with different masks.")
  short_seq_prob: float = option(0.1, "Probability of a shorter target length for a document.")
  ngram: int = option(3, "Maximum n-gram length (in words) to mask.")
  favor_shorter_ngram: bool = option(True, "P(n) proportional to 1/n (else reversed).")
  do_whole_word_mask: bool = option(
      True, "Mask whole words: a non-initial piece joins the previous candidate.")
  random_next_sentence: bool = option(
      False, "NSP-style: B from a random document half of the time (else SOP swaps).")
  random_seed: int = option(
      12345, "Seed: the output depends on inputs, flags and this seed only.")
  # Ours.
  pure_sop: bool = option(
      False, "One-sentence chunks are merged or skipped instead of paired with a random "
      "document, so every label-1 instance is a swap.")
  num_workers: int = option(
      0, "Worker processes (0 = all cores); the output does not depend on it.")
  block_bytes: int = option(
      1 << 20, "Text per work unit; random-document partners and the instance shuffle stay "
      "within one block. Changing it changes the output.")
  input_encoding: str = option("utf-8", "Encoding of the input files (e.g. latin-1).")
  strict: bool = option(False, "Fail on a line that does not decode instead of skipping it.")
  # "jieba": Chinese words are masked whole (SPEC.md "Chinese (albert_zh) practice").
  word_segmentation: str = option(
      "none", "jieba: segment each line with jieba so whole-word / n-gram masking takes "
      "Chinese words whole (albert_zh practice; ids stay plain characters). Needs "
      "--vocab_file; refused with --spm_model_file.", choices=WORD_SEGMENTATIONS)
  # Records without masks, for run_pretraining --dynamic_masking (`dynamic_masking.py`):
  # input_ids as tokenized, token_boundary as always, empty masked_lm_* features.
  no_masking: bool = option(
      False, "Write the instances unmasked (empty masked_lm_* features) for run_pretraining.py "
      "--dynamic_masking, which masks them anew each epoch; the masking flags are then "
      "run_pretraining's.")

  def validate(self):
    def fail(flag, why):
      raise ValueError(f"--{flag}={getattr(self, flag)!r}: {why}")
    if not self.spm_model_file and not self.vocab_file:
      raise ValueError("one of --spm_model_file (SentencePiece) or --vocab_file (WordPiece) "
                       "is required")
    # The original's instances hold max_seq_length - 3 tokens besides [CLS] A [SEP] B [SEP]:
    # two segments need at least 2 (one each), and its short target is drawn from
    # [2, max_seq_length - 3]. Below 5 no instance can have two segments (the original
    # fails in that draw); from 5 on, chunks of short sentences can (see
    # sentence_order_warning for what long sentences do at small lengths).
    if self.max_seq_length < 5:
      fail("max_seq_length", "must be at least 5: [CLS] A [SEP] B [SEP] with one token in "
           "each segment (max_seq_length - 3 >= 2)")
    if self.max_predictions_per_seq < 1:
      fail("max_predictions_per_seq", "must be at least 1")
    if not 0.0 <= self.masked_lm_prob <= 1.0:
      fail("masked_lm_prob", "must be in [0, 1]")
    if not 0.0 <= self.short_seq_prob <= 1.0:
      fail("short_seq_prob", "must be in [0, 1]")
    if self.dupe_factor < 1:
      fail("dupe_factor", "must be at least 1")
    if self.ngram < 1:
      fail("ngram", "must be at least 1")
    if self.num_workers < 0:
      fail("num_workers", "must be 0 (all cores) or more")
    if self.block_bytes < 1:
      fail("block_bytes", "must be positive")
    if self.word_segmentation not in WORD_SEGMENTATIONS:
      fail("word_segmentation", f"must be one of {', '.join(WORD_SEGMENTATIONS)}")
    if self.word_segmentation == "jieba" and self.spm_model_file:
      # SentencePiece pieces do not map one to a character, and its word starts come from
      # "▁": only albert_zh's WordPiece vocab has the practice to follow.
      fail("word_segmentation", "needs --vocab_file (WordPiece, e.g. albert_zh), not "
           "--spm_model_file")
    "".encode(self.input_encoding)  # LookupError names an unknown encoding

  def masking_budget_warning(self):
    """A message when max_predictions_per_seq caps the masking of full-length sequences."""
    wanted = max(1, int(round(self.max_seq_length * self.masked_lm_prob)))
    if wanted > self.max_predictions_per_seq:
      return (f"--max_predictions_per_seq={self.max_predictions_per_seq} is smaller than the "
              f"{wanted} predictions that --masked_lm_prob={self.masked_lm_prob} asks for at "
              f"--max_seq_length={self.max_seq_length}: full-length instances will mask only "
              f"{self.max_predictions_per_seq / self.max_seq_length:.3f} of their tokens")
    return None

  def sentence_order_warning(self, statistics):
    """A message when one sentence-order label is under 10% of at least 100 instances.

    A chunk is full once it reaches max_seq_length - 3 tokens; a chunk of one sentence takes
    B from a random document, with label 1. When most sentences are that long, few chunks
    hold two sentences to keep or swap, and label 0 all but vanishes.
    """
    instances = statistics.get("instances", 0)
    label_1 = statistics.get("sentence_order_label_1", 0)
    random_partner = statistics.get("random_partner", 0)
    if instances < 100 or min(label_1, instances - label_1) >= 0.1 * instances:
      return None
    message = (f"sentence-order labels are unbalanced: {instances - label_1} of {instances} "
               f"instances have label 0 and {label_1} label 1 ({random_partner} with B from a "
               "random document)")
    if random_partner >= 0.5 * instances:
      message += (f"; at --max_seq_length={self.max_seq_length} a chunk holds "
                  f"{self.max_seq_length - 3} tokens, so most sentences fill one alone and "
                  "get a random partner. A longer --max_seq_length (or shorter lines) gives "
                  "chunks of two or more sentences to keep or swap")
    return message


def expand_input_files(patterns):
  """Comma list of files and globs -> sorted files; a pattern matching nothing is an error."""
  found = []
  for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
    if "://" in pattern:  # gs://... and the other file systems of TensorFlow
      import tensorflow as tf  # pylint: disable=import-outside-toplevel
      matches = sorted(m for m in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(m))
    else:
      matches = sorted(m for m in glob.glob(pattern) if os.path.isfile(m))
    if not matches:
      raise FileNotFoundError(f"--input_file pattern matches no file: {pattern}")
    found.extend(matches)
  if not found:
    raise FileNotFoundError(f"--input_file {patterns!r} names no files")
  return found


def metadata_path(output_files):
  """The JSON beside the shards: their common prefix (e.g. `train-*.tfrecord` -> `train.json`);
  None for no shards (which `check_job` refuses)."""
  if not output_files:
    return None
  if len(output_files) == 1:
    return output_files[0] + ".json"
  prefix = os.path.commonprefix(output_files).rstrip("-_.0123456789")
  if not os.path.basename(prefix):
    return output_files[0] + ".json"
  return prefix + ".json"


@dataclasses.dataclass
class ReadReport:
  files: int = 0
  bytes_read: int = 0
  documents: int = 0
  lines: int = 0
  bad_lines: int = 0
  split_documents: int = 0
  long_lines: int = 0
  empty_files: list = dataclasses.field(default_factory=list)
  # Document number -> (path, line number, bytes, lines) of documents that end in a line of
  # at least 8 blocks, until the driver hands them to the block's worker.
  pending_long_lines: dict = dataclasses.field(default_factory=dict)

  def merge(self, other):
    """Adds the counts of `other` (another file's report) to this one."""
    for field in ("files", "bytes_read", "documents", "lines", "bad_lines", "split_documents",
                  "long_lines"):
      setattr(self, field, getattr(self, field) + getattr(other, field))
    self.empty_files.extend(other.empty_files)

  def summary(self):
    """The metadata's "read" entry."""
    return {"files": self.files, "bytes": self.bytes_read, "lines": self.lines,
            "documents": self.documents, "bad_lines": self.bad_lines,
            "split_documents": self.split_documents, "long_lines": self.long_lines,
            "empty_files": list(self.empty_files)}


def iter_file_documents(path, options, report):
  """Yields the documents (lists of raw text lines) of one file, streaming.

  Lines that do not decode are reported with file and line number and skipped (or fatal with
  `strict`); CRLF endings and a UTF-8 byte-order mark are handled. A document longer than
  8 blocks is cut into parts at a line end, so no single document can exhaust memory; a line
  that long is one sentence and stays whole (`report.pending_long_lines` notes it).
  """
  report.files += 1
  document, document_bytes = [], 0
  cut_at = None  # line where a long document was cut: a split if the document goes on
  max_document_bytes = 8 * options.block_bytes
  documents_before = report.documents
  with files.open_file(path, "rb") as f:
    for line_number, raw in enumerate(f, start=1):
      report.bytes_read += len(raw)
      if line_number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
      try:
        line = raw.decode(options.input_encoding)
      except UnicodeDecodeError as e:
        report.bad_lines += 1
        message = (f"{path}:{line_number}: not valid {options.input_encoding} ({e.reason} at "
                   f"byte {e.start}); use --input_encoding for other encodings")
        if options.strict:
          raise ValueError(message + " (--strict)") from None
        if report.bad_lines <= 10:
          logger.warning("%s; line skipped", message)
        continue
      if line.strip():
        if cut_at is not None:
          if report.split_documents == 0:
            logger.warning("%s:%d: document longer than %d bytes is split into parts "
                           "here", path, cut_at, max_document_bytes)
          report.split_documents += 1
          cut_at = None
        document.append(line)
        document_bytes += len(raw)
        report.lines += 1
        if document_bytes >= max_document_bytes:
          # Bounded memory: a document with no blank line for megabytes is cut in parts.
          if len(raw) >= max_document_bytes:
            report.long_lines += 1
            report.pending_long_lines[report.documents] = (path, line_number, len(raw),
                                                           len(document))
          report.documents += 1
          yield document
          document, document_bytes = [], 0
          cut_at = line_number
      else:
        cut_at = None
        if document:
          report.documents += 1
          yield document
          document, document_bytes = [], 0
  if document:
    report.documents += 1
    yield document
  if report.documents == documents_before:
    report.empty_files.append(path)
    logger.warning("%s: no documents (empty file)", path)


def iter_blocks(documents, block_bytes):
  """Groups documents into blocks of at least `block_bytes` of text (the last may be less)."""
  block, size = [], 0
  for document in documents:
    block.append(document)
    size += sum(len(line) for line in document)
    if size >= block_bytes:
      yield block
      block, size = [], 0
  if block:
    yield block


def iter_file_blocks(file_index, path, options, report):
  """(block key, block, long-line notes) of one file, in order.

  Blocks never span two files, so that each file can be read by its own worker (the Beam
  pipeline): a block's key is (index of the file in the input list, block number in the file),
  which seeds its random choices and places its records in the shards. `report` counts the
  reading; the notes are `_with_long_lines`'.
  """
  first = report.documents
  blocks = iter_blocks(iter_file_documents(path, options, report), options.block_bytes)
  for number, (block, notes) in enumerate(_with_long_lines(blocks, report, first)):
    yield (file_index, number), block, notes


def shard_offset(random_seed, block_key, num_shards):
  """The shard of a block's first record; the next ones go round-robin from it. Seeded by the
  block's key alone, so any worker places any block's records without knowing the others."""
  file_index, number = block_key
  return random.Random(f"{random_seed}/{file_index}/{number}/shard").randrange(num_shards)


# --- worker side ---------------------------------------------------------------------------------
_WORKER = {}


def init_worker(options):
  """Readies this process for `process_block` under `options`: the tokenizer, the masking
  and instance options. Each worker process calls it once (the local pool's initializer, a
  Beam DoFn's setup) and keeps them for every block it processes."""
  tokenizer = tokenization.FullTokenizer(vocab_file=options.vocab_file,
                                         do_lower_case=options.do_lower_case,
                                         spm_model_file=options.spm_model_file)
  inverse = tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
  word_start = tuple(tokenizer.is_word_start(p) for p in inverse)
  segmented = options.word_segmentation == "jieba"
  segment = None
  if segmented:
    # Imported here: only Chinese runs need jieba, and each worker loads its own dictionary.
    from albert_tf.data.pretraining import chinese  # pylint: disable=import-outside-toplevel
    chinese.load_jieba()
    segment = chinese.encode_with_word_starts
    word_start = continued_word_start(word_start)
  masking = MaskingOptions(
      vocab_size=tokenizer.vocab_size, mask_id=tokenizer.mask_id, cls_id=tokenizer.cls_id,
      sep_id=tokenizer.sep_id, word_start=word_start,
      masked_lm_prob=0.0 if options.no_masking else options.masked_lm_prob,
      max_predictions_per_seq=options.max_predictions_per_seq, ngram=options.ngram,
      favor_shorter_ngram=options.favor_shorter_ngram,
      do_whole_word_mask=options.do_whole_word_mask, continued_pieces=segmented)
  instance_options = InstanceOptions(
      max_seq_length=options.max_seq_length, short_seq_prob=options.short_seq_prob,
      random_next_sentence=options.random_next_sentence, pure_sop=options.pure_sop)
  _WORKER.update(options=options, tokenizer=tokenizer, masking=masking,
                 instance_options=instance_options, segment=segment, char_cache={})


def _init_pool_worker(options):
  # Ctrl-C reaches the whole process group: the driver alone stops, and terminates the pool.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  init_worker(options)


def _encode_lines(lines, stats):
  """Ids of each line; with word segmentation, a piece that continues a Chinese word is
  marked (`mark_continued`). Each line is segmented once, before all dupe passes."""
  tokenizer, segment = _WORKER["tokenizer"], _WORKER["segment"]
  if segment is None:
    return tokenizer.encode_ids(lines)
  masking, cache = _WORKER["masking"], _WORKER["char_cache"]
  word_start, vocab_size = masking.word_start, masking.vocab_size
  encoded = []
  for line in lines:
    ids, starts = segment(tokenizer, line, cache)
    encoded.append(mark_continued(ids, starts, vocab_size))
    # Pieces that start no word only because segmentation put them inside a Chinese word.
    stats["segmentation_continued_pieces"] += sum(
        1 for i, start in zip(ids, starts) if word_start[i] and not start)
  return encoded


def process_block(block_key, block, long_lines=None):
  """Tokenizes one block of documents and returns (serialized records, statistics, long-line
  reports). `block_key` is (file index, block number in the file): the seeds of every random
  choice.

  `long_lines` maps a document's index in the block to (path, line number, bytes, lines) of
  the overlong line that ends it; its report says how many of the document's tokens its
  instances keep and how many are dropped, over all dupe passes.
  """
  options = _WORKER["options"]
  masking, instance_options = _WORKER["masking"], _WORKER["instance_options"]
  long_lines = long_lines or {}
  lines = [line for document in block for line in document]
  segmentation_stats = collections.Counter()
  ids = _encode_lines(lines, segmentation_stats)
  documents, reports, k = [], {}, 0
  for block_document, document in enumerate(block):
    sentences = [s for s in ids[k:k + len(document)] if s]
    k += len(document)
    if sentences:
      if block_document in long_lines:
        path, line, size, num_lines = long_lines[block_document]
        reports[len(documents)] = dict(path=path, line=line, bytes=size, lines=num_lines,
                                       tokens=sum(len(s) for s in sentences), instances=0,
                                       dropped=0)
      documents.append(sentences)
  stats = collections.Counter(documents=len(documents),
                              sentences=sum(len(d) for d in documents),
                              tokens=sum(len(s) for d in documents for s in d))
  stats.update(segmentation_stats)
  instance_stats = {}
  instances = []
  seed = options.random_seed
  file_index, number = block_key
  block_seed = f"{seed}/{file_index}/{number}"
  for dupe in range(options.dupe_factor):
    for index, document in enumerate(documents):
      rng = random.Random(f"{block_seed}/{dupe}/{index}")
      dropped_before = instance_stats.get("dropped_tokens", 0)
      created = create_instances(document, index, documents, rng, instance_options, masking,
                                 instance_stats)
      instances.extend(created)
      if index in reports:
        reports[index]["instances"] += len(created)
        reports[index]["dropped"] += instance_stats.get("dropped_tokens", 0) - dropped_before
  random.Random(f"{block_seed}/shuffle").shuffle(instances)
  serialized = []
  max_predictions = 0 if options.no_masking else options.max_predictions_per_seq
  for instance in instances:
    serialized.append(records.encode_example(records.instance_features(
        instance, options.max_seq_length, max_predictions)))
    stats["instances"] += 1
    stats["sentence_order_label_1"] += instance.sentence_order_label
    stats["masked_lm_predictions"] += len(instance.masked_lm_positions)
    stats["instance_tokens"] += len(instance.input_ids)
    if (not options.no_masking
        and len(instance.masked_lm_positions) < num_to_predict(len(instance.input_ids),
                                                                masking)):
      stats["under_budget_instances"] += 1
  for key in ("single_sentence_skipped", "random_partner", "dropped_tokens"):
    stats[key] = instance_stats.get(key, 0)
  for n, count in enumerate(instance_stats.get("span_counts", []), start=1):
    stats[f"masked_ngram_{n}"] = count
  for n, count in enumerate(instance_stats.get("drawn_counts", []), start=1):
    stats[f"drawn_ngram_{n}"] = count
  for report in reports.values():
    report["kept"] = report["tokens"] * options.dupe_factor - report["dropped"]
  return serialized, dict(stats), list(reports.values())


# --- driver ------------------------------------------------------------------------------------
class _Progress:
  """Logs documents, instances, MB/s and ETA every `every` seconds."""

  def __init__(self, total_bytes, every=10.0):
    self.total_bytes, self.every = max(total_bytes, 1), every
    self.start = self.last = time.time()

  def update(self, report, instances, force=False):
    now = time.time()
    if not force and now - self.last < self.every:
      return
    self.last = now
    elapsed = max(now - self.start, 1e-9)
    rate = report.bytes_read / elapsed
    eta = (self.total_bytes - report.bytes_read) / rate if rate > 0 else float("inf")
    logger.info("%d documents, %d instances (%.0f/s), %.1f of %.1f MB read (%.2f MB/s), "
                "ETA %.0fs", report.documents, instances, instances / elapsed,
                report.bytes_read / 1e6, self.total_bytes / 1e6, rate / 1e6, max(eta, 0.0))


def _with_long_lines(blocks, report, first=0):
  """(block, {document index in the block: where its overlong last line is}) per block;
  `first` is the report's document number of the first block's first document."""
  for block in blocks:
    end = first + len(block)
    # The reader has read every document of the block by now, so their notes are in.
    notes = {n - first: report.pending_long_lines.pop(n)
             for n in sorted(report.pending_long_lines) if n < end}
    yield block, notes
    first = end


def log_long_line(report, dupe_factor):
  """Warns of one line too long to split (a `long_lines` report of `process_block`): what its
  document gave and how many tokens it dropped."""
  passes = f" over {dupe_factor} dupe passes" if dupe_factor > 1 else ""
  lines = f"{report['lines']} line" + ("s" if report["lines"] > 1 else "")
  logger.warning(
      "%s:%d: a line of %d bytes is one sentence and is not split into parts (documents are "
      "cut only between lines); the document ending there (%s, %d tokens) gave %d instances "
      "that keep %d tokens%s; %d tokens dropped", report["path"], report["line"],
      report["bytes"], lines, report["tokens"], report["instances"], report["kept"], passes,
      report["dropped"])


def _results_in_order(blocks, options, workers):
  """(block key, block results) in block order; at most 2 blocks per worker in flight.
  `blocks` yields (block key, block, long-line notes)."""
  if workers == 1:
    init_worker(options)
    for key, block, notes in blocks:
      yield key, process_block(key, block, notes)
    return
  context = multiprocessing.get_context("spawn")  # no inherited TensorFlow state in workers
  with context.Pool(workers, initializer=_init_pool_worker, initargs=(options,)) as pool:
    pending = collections.deque()
    for key, block, notes in blocks:
      pending.append((key, pool.apply_async(process_block, (key, block, notes))))
      if len(pending) >= 2 * workers:
        key, result = pending.popleft()
        yield key, result.get()
    while pending:
      key, result = pending.popleft()
      yield key, result.get()


class Interrupted(BaseException):
  """SIGTERM stopped the job. A BaseException, as KeyboardInterrupt (SIGINT) is: a request to
  stop that no `except Exception` may swallow."""

  def __init__(self, signal_number):
    super().__init__(f"stopped by {signal.Signals(signal_number).name}")
    self.signal_number = signal_number


def _sigterm_interrupts():
  """While inside, SIGTERM raises `Interrupted`, as SIGINT raises KeyboardInterrupt: the job
  then stops its workers and removes its temporary shards, which the default SIGTERM (the
  process killed on the spot) would leave behind."""
  return signals.raising_on_sigterm(Interrupted)


def remove_leftovers(output_files, metadata_file):
  """Removes the temporaries of the shards and the metadata that a killed run (SIGKILL, a
  crash) left behind: never complete, never read. Returns them."""
  return files.remove_interrupted(paths=list(output_files) + [metadata_file])


def check_job(input_files, output_files, options, metadata_file):
  """The checks both the local path and the Beam pipeline make before reading anything (so a
  job that cannot finish fails in one line, not after its work); returns the word
  segmentation's metadata."""
  options.validate()
  if not output_files:
    raise ValueError("--output_file names no files")
  overlap = {os.path.abspath(p) for p in output_files} & {os.path.abspath(p)
                                                         for p in input_files}
  if overlap:
    raise ValueError(f"--output_file would overwrite input {sorted(overlap)[0]}")
  if len(set(output_files)) != len(output_files):
    raise ValueError("--output_file names the same shard twice")
  warning = None if options.no_masking else options.masking_budget_warning()
  if warning:
    logger.warning(warning)
  # Fail fast, in this process, on a missing or broken vocabulary (or jieba): a worker that
  # fails to start is only restarted by the pool.
  tokenization.FullTokenizer(vocab_file=options.vocab_file, do_lower_case=options.do_lower_case,
                             spm_model_file=options.spm_model_file)
  segmentation = {"method": "none"}
  if options.word_segmentation == "jieba":
    try:
      from albert_tf.data.pretraining import chinese  # pylint: disable=import-outside-toplevel
    except ImportError as e:
      raise ValueError(f"--word_segmentation=jieba needs the jieba package ({e}); "
                       "pip install -r requirements.txt") from e
    segmentation = chinese.segmentation_metadata()
  check_files(input_files, output_files, metadata_file)
  return segmentation


def check_files(input_files, output_files, metadata_file):
  """Refuses, naming the flag and the path, what would otherwise fail only when a worker
  reads or a shard is written: an input that is not a file, a shard or metadata path that is
  a folder, a shard's folder that does not exist, a folder that cannot be written (probed by
  `files.check_writable`). The metadata's folder is created, as writing it would.

    check_files(["corpus.txt"], ["out/a.tfrecord"], "out/a.json")  # FileNotFoundError if no out/
  """
  for path in input_files:
    if not files.is_remote(path) and not os.path.isfile(path):
      raise FileNotFoundError(f"--input_file: no such file: {path}")
  if metadata_file in output_files:
    raise ValueError(f"--metadata_file={metadata_file} is also an --output_file shard")
  probed = set()
  for flag, path in [("--output_file", p) for p in output_files] + [("--metadata_file",
                                                                    metadata_file)]:
    folder = os.path.dirname(path.rstrip("/")) or "."
    # A shard's folder must be there (the local writer's rule); per-shard look-ups on an object
    # store would cost a request each, and its "folders" exist once written to.
    if not files.is_remote(path):
      if os.path.isdir(path):
        raise IsADirectoryError(f"{flag}={path} is a folder, not a file")
      if flag == "--output_file" and not os.path.isdir(folder):
        raise FileNotFoundError(f"{flag}: output folder does not exist: {folder} (for {path})")
    if folder not in probed:
      files.check_writable(folder, flag=f"{flag}'s folder")
      probed.add(folder)


def build_metadata(options, input_files, output_files, counts, totals, report, elapsed):
  """The metadata JSON's dict (without how it ran: `workers`, `runner`)."""
  metadata = {
      "format": METADATA_FORMAT,
      "flags": dataclasses.asdict(options),
      "input_files": list(input_files),
      "shards": [{"path": os.path.basename(p), "instances": n}
                 for p, n in zip(output_files, counts)],
      "total_instances": totals["instances"],
      "max_seq_length": options.max_seq_length,
      # The records' masked_lm_* length: 0 when unmasked (--no_masking).
      "max_predictions_per_seq": 0 if options.no_masking else options.max_predictions_per_seq,
      "masking": "none" if options.no_masking else "static",
      "read": report.summary(),
      "statistics": {k: totals[k] for k in sorted(totals)},
      "elapsed_seconds": round(elapsed, 3),
      "instances_per_second": round(totals["instances"] / max(elapsed, 1e-9), 1),
  }
  del metadata["flags"]["num_workers"]  # does not change the output
  # What run_pretraining --dynamic_masking needs to mask these records.
  tokenizer = tokenization.FullTokenizer(vocab_file=options.vocab_file,
                                         do_lower_case=options.do_lower_case,
                                         spm_model_file=options.spm_model_file)
  metadata["vocab_size"] = tokenizer.vocab_size
  metadata["special_ids"] = {"cls": tokenizer.cls_id, "sep": tokenizer.sep_id,
                             "mask": tokenizer.mask_id}
  return metadata


def write_metadata(metadata_file, metadata):
  """The JSON, written under a temporary name and renamed (any TensorFlow file system)."""
  files.write_text(metadata_file, json.dumps(metadata, indent=2) + "\n")


def log_summary(options, totals, output_files, elapsed, metadata_file, bad_lines):
  """What the job made, what it dropped and what looks wrong, for the log."""
  logger.info("Wrote %d instances to %d shards in %.1fs (%.0f instances/s); metadata: %s",
              totals["instances"], len(output_files), elapsed,
              totals["instances"] / max(elapsed, 1e-9), metadata_file)
  if bad_lines:
    logger.warning("skipped %d lines that were not valid %s", bad_lines,
                   options.input_encoding)
  if totals["dropped_tokens"]:
    passed = totals["tokens"] * options.dupe_factor
    logger.info("%d of the %d document tokens of %d dupe passes (%.1f%%) are in no instance "
                "(cut to fit --max_seq_length=%d%s)", totals["dropped_tokens"], passed,
                options.dupe_factor, 100.0 * totals["dropped_tokens"] / max(passed, 1),
                options.max_seq_length,
                ", or a lone last sentence under --pure_sop" if options.pure_sop else "")
  warning = options.sentence_order_warning(totals)
  if warning:
    logger.warning(warning)


def no_instances_error(input_files):
  return ValueError(f"no instances: the input ({len(input_files)} files) holds no non-empty "
                    "document")


def create_pretraining_data(input_files, output_files, options, metadata_file=None):
  """Runs the whole job; returns the metadata dict also written to `metadata_file`."""
  output_files = [os.fspath(p) for p in output_files]
  metadata_file = metadata_file or metadata_path(output_files)
  segmentation = check_job(input_files, output_files, options, metadata_file)
  workers = options.num_workers or os.cpu_count() or 1
  remove_leftovers(output_files, metadata_file)
  report = ReadReport()
  totals = collections.Counter()
  progress = _Progress(sum(os.path.getsize(p) for p in input_files))
  with _sigterm_interrupts():
    writer = tfrecords.AtomicShardWriter(output_files)
    blocks = (item for index, path in enumerate(input_files)
              for item in iter_file_blocks(index, path, options, report))
    results = _results_in_order(blocks, options, workers)
    try:
      for key, (serialized, stats, long_lines) in results:
        writer.write(serialized, shard_offset(options.random_seed, key, len(output_files)))
        totals.update(stats)
        for long_line in long_lines:
          log_long_line(long_line, options.dupe_factor)
        progress.update(report, totals["instances"])
      if totals["instances"] == 0:
        raise no_instances_error(input_files)
    except BaseException as e:
      results.close()  # terminates the pool now, not when the generator is collected
      writer.abort()
      if isinstance(e, (Interrupted, KeyboardInterrupt)):
        logger.warning("%s: the workers are stopped and the temporary shards removed (%s); "
                       "nothing was written under the output names",
                       e if isinstance(e, Interrupted) else "stopped by SIGINT",
                       ", ".join(writer.temp_files))
      raise
  writer.commit()
  progress.update(report, totals["instances"], force=True)
  elapsed = time.time() - progress.start
  metadata = build_metadata(options, input_files, output_files, writer.counts, totals, report,
                            elapsed)
  metadata["workers"] = workers
  # jieba's version fixes its dictionary, hence which characters were masked together.
  metadata["word_segmentation"] = segmentation
  write_metadata(metadata_file, metadata)
  log_summary(options, totals, output_files, elapsed, metadata_file, report.bad_lines)
  return metadata
