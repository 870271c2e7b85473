"""Trains a SentencePiece model with the original ALBERT recipe (SPEC.md, "Tokenization").

    train_sentencepiece("corpus/*.txt", "out/30k-clean", vocab_size=30000)

Unigram model; <pad>=0, <unk>=1, no <s>/</s>; control symbols [CLS]=2, [SEP]=3, [MASK]=4;
user symbols ( ) " - . – £ € kept as single pieces; character_coverage 0.99995; input
sentences shuffled. Every line is normalised with `preprocess_text` (lowercased with
`do_lower_case`, the default) exactly as `FullTokenizer` does before encoding, so the model
sees at training what it sees at encode time. Blank lines are skipped. The corpus is streamed
to SentencePiece line by line, never held here (SentencePiece itself keeps at most
`input_sentence_size` sampled sentences). `out/30k-clean.model` and `.vocab` appear only
once training has succeeded.

On the command line: `python -m albert_tf.cli.train_spm` (albert_tf/cli/train_spm.py).
"""

import glob
import os

import sentencepiece

from albert_tf import files
from albert_tf.tokenization.tokenizer import SPM_SPECIALS, preprocess_text

# The original's trainer_spec (read from ALBERT's released 30k-clean.model), less its corpus.
RECIPE = {
    "model_type": "unigram",
    "pad_id": 0,
    "pad_piece": SPM_SPECIALS["pad"],
    "unk_id": 1,
    "unk_piece": SPM_SPECIALS["unk"],
    "bos_id": -1,
    "eos_id": -1,
    # Control symbols take the next ids in this order: [CLS]=2, [SEP]=3, [MASK]=4.
    "control_symbols": [SPM_SPECIALS["cls"], SPM_SPECIALS["sep"], SPM_SPECIALS["mask"]],
    "user_defined_symbols": ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"],
    "character_coverage": 0.99995,
    "shuffle_input_sentence": True,
    "input_sentence_size": 10_000_000,
    "seed_sentencepiece_size": 1_000_000,
    # The normalisation rule is stored in the .model and applied by SentencePiece both here and
    # at every encode (FullTokenizer, in-graph tokenizers), so training and encoding agree
    # whatever the rule. What must also agree is `preprocess_text`, and in particular its
    # lowercasing, since no rule case-folds: we apply it to the corpus with the same `lower`
    # FullTokenizer uses. We keep the original's nmt_nfkc rather than "identity": on
    # preprocess_text's output (NFKD, marks dropped) it changes no letters' case, and it keeps
    # the model sound for callers that give SentencePiece raw text.
    "normalization_rule_name": "nmt_nfkc",
}

DEFAULT_NUM_THREADS = min(16, os.cpu_count() or 1)  # the original trained with 16

_REPORT_EVERY = 1_000_000  # lines


def expand_inputs(input_files):
  """Input paths from a comma list (str) or a list of paths and glob patterns, in order.

  Raises FileNotFoundError naming a pattern that matches nothing or a path that is missing.
  """
  if isinstance(input_files, (str, os.PathLike)):
    input_files = os.fspath(input_files).split(",")
  paths = []
  for entry in input_files:
    entry = os.path.expanduser(os.fspath(entry).strip())
    if not entry:
      continue
    if glob.has_magic(entry):
      matches = sorted(p for p in glob.glob(entry) if os.path.isfile(p))
      if not matches:
        raise FileNotFoundError(f"--input pattern {entry!r} matches no file")
    elif os.path.isfile(entry):
      matches = [entry]
    else:
      raise FileNotFoundError(f"--input file not found: {entry!r}")
    paths.extend(p for p in matches if p not in paths)
  if not paths:
    raise ValueError("--input names no file")
  return paths


class _Corpus:
  """Iterates the normalised, non-blank lines of `paths`, counting them as it goes.

  SentencePiece turns an exception raised inside its sentence iterator into a RuntimeError
  without the original type or message, so the first one is kept in `error` to re-raise.
  """

  def __init__(self, paths, do_lower_case, log):
    self.paths = paths
    self.do_lower_case = do_lower_case
    self.log = log
    self.lines_read = 0
    self.sentences = 0
    self.error = None

  def __iter__(self):
    try:
      for path in self.paths:
        with open(path, encoding="utf-8-sig") as reader:
          line_number = 0
          try:
            for line_number, line in enumerate(reader, 1):
              self.lines_read += 1
              if self.lines_read % _REPORT_EVERY == 0:
                self.log(f"read {self.lines_read:,} lines ...")
              text = preprocess_text(line, lower=self.do_lower_case)
              if text:
                self.sentences += 1
                yield text
          except UnicodeDecodeError as e:
            raise ValueError(f"--input file {path!r} is not valid utf-8 after line "
                             f"{line_number}: {e}") from e
      self.log(f"read {self.lines_read:,} lines ({self.sentences:,} non-blank) from "
               f"{len(self.paths)} file(s)")
    except Exception as e:
      self.error = e
      raise


def train_sentencepiece(input_files, model_prefix, vocab_size, do_lower_case=True,
                        log=print, **options):
  """Trains a SentencePiece model with ALBERT's recipe; returns the path of the .model.

    path = train_sentencepiece("corpus/*.txt", "out/spm", vocab_size=30000)
    FullTokenizer(spm_model_file=path, do_lower_case=True)   # the same do_lower_case

  Args:
    input_files: a comma list of paths and glob patterns, or a list of them; utf-8 text.
    model_prefix: writes `<model_prefix>.model` and `.vocab`; the folder is created.
    vocab_size: number of pieces, the 5 special ones included.
    do_lower_case: lowercase every line; a FullTokenizer for the model must use the same.
    log: called with each progress message (str).
    **options: SentencePiece trainer options, overriding `RECIPE` (e.g. num_threads,
      input_sentence_size, character_coverage, seed_sentencepiece_size, minloglevel).

  Raises:
    FileNotFoundError: an input path or pattern matches no file.
    ValueError: no usable text, or `vocab_size` does not suit the corpus.
  """
  for reserved in ("input", "sentence_iterator", "model_prefix", "model_writer"):
    if reserved in options:
      raise TypeError(f"train_sentencepiece sets {reserved!r} itself")
  paths = expand_inputs(input_files)
  model_prefix = os.path.abspath(os.path.expanduser(os.fspath(model_prefix)))
  out_dir, name = os.path.split(model_prefix)
  if not name:
    raise ValueError(f"--model_prefix {model_prefix!r} names a folder, not a file prefix")
  os.makedirs(out_dir, exist_ok=True)

  spec = dict(RECIPE, minloglevel=1)  # SentencePiece's INFO log is per EM step: opt-in
  spec.update(options)
  corpus = _Corpus(paths, do_lower_case, log)
  inputs = ",".join(paths)
  log(f"training a {spec['model_type']} SentencePiece model, vocab_size {vocab_size}, "
      f"do_lower_case {do_lower_case}, on {inputs}")

  # Train under a temporary prefix beside the target, then rename: a reader never finds a
  # half-written model, and a failed run leaves the previous one in place.
  tmp_dir = files.temporary_name(model_prefix)  # files.py's rule: a kill leaves a known name
  os.makedirs(tmp_dir)
  try:
    try:
      sentencepiece.SentencePieceTrainer.train(
          sentence_iterator=iter(corpus), model_prefix=os.path.join(tmp_dir, name),
          vocab_size=vocab_size, **spec)
    except RuntimeError as e:
      if corpus.error is not None:
        raise corpus.error from None
      if corpus.sentences == 0:
        raise ValueError(f"--input {inputs} has no non-blank line to train on") from e
      if "vocab" in str(e).lower():
        raise ValueError(f"--vocab_size {vocab_size} does not suit --input {inputs} "
                         f"({corpus.sentences:,} non-blank lines): {e}") from e
      raise RuntimeError(f"SentencePiece training on --input {inputs} failed: {e}") from e
    for suffix in (".vocab", ".model"):  # .model last: its presence means both are there
      files.rename(os.path.join(tmp_dir, name + suffix), model_prefix + suffix)
  finally:
    files.remove(tmp_dir)

  model_file = model_prefix + ".model"
  sp_model = sentencepiece.SentencePieceProcessor(model_file=model_file)
  special_ids = " ".join(f"{piece}={sp_model.piece_to_id(piece)}"
                         for piece in SPM_SPECIALS.values())
  log(f"wrote {model_file} and {model_prefix}.vocab: {sp_model.get_piece_size()} pieces, "
      f"{special_ids}")
  return model_file

