"""What a study varies: the scale, the variants, and each run's config and key."""

import dataclasses


CORPORA = ("gutenberg", "docstrings")


@dataclasses.dataclass
class Scale:
  """Model, pretraining and fine-tuning sizes of a study."""
  hidden: int = 128
  layers: int = 4
  heads: int = 4
  intermediate: int = 512
  embedding: int = 64
  seq: int = 64
  max_predictions: int = 10
  batch: int = 64
  steps: int = 1500
  warmup: int = 150
  learning_rate: float = 0.01
  dupe_factor: int = 3
  eval_batches: int = 40
  eval_batch: int = 64
  finetune_batch: int = 32
  # 1e-4: at 5e-4 one of six SST-2 runs collapsed to a constant (50.9%); that checkpoint gives
  # 75.5% at 2e-4 and 74.1% at 1e-4, and STS-B (600 steps) r = 0.19 at 1e-4, 0.03 at 2e-4.
  finetune_learning_rate: float = 1e-4
  sst2_train_examples: int = 8000
  sst2_steps: int = 300
  stsb_train_examples: int = 0  # 0 = all
  stsb_steps: int = 600  # about 3.3 epochs of its 5,749 examples
  dev_examples: int = 0  # 0 = the whole dev set
  corpus_fraction: float = 1.0  # of every book, for a quick look
  # The pretraining text: "gutenberg" (NLTK's Gutenberg books) or "docstrings" (the standard
  # library's docstrings, the quickstart's corpus), and the SentencePiece model: 0 = ALBERT's
  # 30k-piece English model, N = a model of N pieces trained on the training split.
  corpus: str = "gutenberg"
  vocab: int = 0

  def problems(self):
    """What is wrong with the scale, as "--flag=value: must be ..." lines (none: usable)."""
    zero_is_all = ("warmup", "sst2_train_examples", "stsb_train_examples", "dev_examples",
                   "vocab")
    found = []
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if field.name == "corpus":
        if value not in CORPORA:
          found.append(f"--corpus={value}: must be one of {', '.join(CORPORA)}")
      elif field.name == "corpus_fraction":
        if not 0.0 < value <= 1.0:
          found.append(f"--{field.name}={value}: must be in (0, 1]")
      elif isinstance(value, float):
        if not value > 0.0:
          found.append(f"--{field.name}={value}: must be > 0")
      elif value < (0 if field.name in zero_is_all else 1):
        found.append(f"--{field.name}={value}: must be >= {0 if field.name in zero_is_all else 1}")
    if self.hidden % self.heads:
      found.append(f"--hidden={self.hidden} is not divisible by --heads={self.heads}")
    if 0 < self.vocab < 1000:
      found.append(f"--vocab={self.vocab}: must be 0 (ALBERT's model) or at least 1000")
    if self.max_predictions > self.seq:
      found.append(f"--max_predictions={self.max_predictions} exceeds --seq={self.seq}")
    return found

  def embedding_sizes(self):
    """E from H/8 to H: the paper's 64..768 at H = 768, scaled."""
    return [self.hidden // 8, self.hidden // 4, self.hidden // 2, self.hidden]


TOY = dict(hidden=32, layers=2, heads=2, intermediate=64, embedding=16, seq=32,
           max_predictions=5, batch=16, steps=12, warmup=2, learning_rate=0.005,
           dupe_factor=1, eval_batches=2, eval_batch=16, finetune_batch=16, sst2_steps=6,
           sst2_train_examples=96, stsb_train_examples=96, stsb_steps=6, dev_examples=64,
           corpus_fraction=0.03)


@dataclasses.dataclass(frozen=True)
class Variant:
  name: str
  data: str = "sop"  # "sop" or "nsp" pretraining data
  sentence_loss_weight: float = 1.0
  sharing: str = "all"
  embedding: int = None  # None = the scale's


def variants(study, scale):
  if study == "sentence_task":
    return [Variant("none", sentence_loss_weight=0.0), Variant("nsp", data="nsp"),
            Variant("sop")]
  if study == "sharing":
    return [Variant("all-shared", sharing="all"), Variant("shared-attention", sharing="attention"),
            Variant("shared-FFN", sharing="ffn"), Variant("not-shared", sharing="none")]
  if study == "embedding_size":
    fractions = ("1/8", "1/4", "1/2", "1")
    return [Variant(f"{label} E/H={f}", sharing=sharing, embedding=e)
            for label, sharing in (("not-shared", "none"), ("all-shared", "all"))
            for f, e in zip(fractions, scale.embedding_sizes())]
  raise ValueError(f"--study={study!r}: must be one of {', '.join(STUDIES)}")


STUDIES = ("sentence_task", "sharing", "embedding_size")


def config_for(variant, scale):
  from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
  return AlbertConfig(
      vocab_size=scale.vocab or 30000, embedding_size=variant.embedding or scale.embedding,
      hidden_size=scale.hidden, num_hidden_layers=scale.layers,
      num_attention_heads=scale.heads, intermediate_size=scale.intermediate,
      max_position_embeddings=max(64, scale.seq), hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0, sharing=variant.sharing)


def run_key(variant, scale, seed):
  """What makes a run: the model, the data style, the sentence loss, the schedule, the seed."""
  e = variant.embedding or scale.embedding
  text = "" if (scale.corpus, scale.vocab) == ("gutenberg", 0) else (
      f"-{scale.corpus}-v{scale.vocab or 30000}")  # the first studies' keys kept as they were
  return (f"{variant.data}-w{variant.sentence_loss_weight:g}-{variant.sharing}-E{e}"
          f"-H{scale.hidden}-L{scale.layers}-s{scale.steps}-b{scale.batch}-seq{scale.seq}"
          f"{text}-seed{seed}")
