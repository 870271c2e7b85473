"""Starting points written by other libraries, read as the original's TF1 names.

    weights = sources.read("albert_en_base_3")      # a TF Hub SavedModel, detected
    weights.format                                  # "tfhub"
    weights.arrays["bert/embeddings/word_embeddings"]  # [vocab, E], as the original stores it

Each reader (its own module: `tfhub.py`, `model_garden.py`, `keras_hub.py`) turns a library's
artifact into `ForeignWeights`: its arrays under the original's TF1 names and in the original's
shapes (`tf1_names.tf1_variable_map`), plus whatever the artifact carries of the config and
the tokenizer. Everything else then treats the source as it treats an original TF1 checkpoint:
`checkpoints.load_checkpoint` loads it into any model (every shape checked before anything is
assigned), `convert.read` converts it, and the scripts start from it with `--init_checkpoint`.

A reader registers `detect(path) -> bool` (cheap: files and names, never the weights) and
`read(path, with_arrays=True) -> ForeignWeights` (with_arrays=False: config and tokenizer
only, `arrays` empty, for a script filling its defaults). Detection must not claim another format's artifact, our own
exports and checkpoints included.
"""

import dataclasses
import importlib

from albert_tf.interop import handles, saved_models

# The reader modules, asked in this order (a TF1 Hub module is a SavedModel too: first).
_READER_MODULES = ("albert_tf.interop.tfhub_tf1", "albert_tf.interop.tfhub",
                   "albert_tf.interop.model_garden", "albert_tf.interop.keras_hub")


@dataclasses.dataclass
class ForeignWeights:
  """An artifact of another library, as the original's TF1 names.

  `arrays`: {TF1 name: ndarray} in the original's shapes (`bert/...`, `cls/predictions/...`,
  `cls/seq_relationship/...`, a classifier's `output_weights` / `output_bias`). `config`: an
  albert_config.json dict when the artifact carries one, else None (the caller then needs
  --albert_config_file). `unused`: the artifact's own names of weights with no TF1
  counterpart (reported, never loaded). `head`: a task head the arrays hold, as
  `convert.HEADS` names it, when the names alone cannot tell (else None). `config_file`: a
  file of the artifact that `AlbertConfig.from_json_file` reads (config_formats.py), if any.
  """
  format: str
  path: str
  arrays: dict
  config: dict = None
  spm_model_file: str = None
  vocab_file: str = None
  do_lower_case: bool = None
  unused: list = dataclasses.field(default_factory=list)
  head: str = None
  config_file: str = None
  # The head count the attention weights are split into, where the artifact's shapes say it
  # ([H, heads, head_size]): the one fact of the config that the original's [H, H] shapes
  # cannot check, so a config given with another one is refused when loading.
  num_attention_heads: int = None


@dataclasses.dataclass
class Reader:
  format: str
  description: str  # what the artifact is, for messages ("a TF Hub SavedModel (...)")
  detect: object
  read: object


_READERS = {}


def register(format_name, description, detect, read):
  """Adds a reader (called by each reader module when it is imported)."""
  _READERS[format_name] = Reader(format_name, description, detect, read)


def readers():
  """{format: Reader} of every reader module that imports (one whose library is missing is
  left out)."""
  for name in _READER_MODULES:
    try:
      importlib.import_module(name)
    except ModuleNotFoundError as e:
      if e.name != name:  # the reader exists, something it imports does not
        raise
  return dict(_READERS)


def detect(path):
  """The format of the foreign artifact at `path`, or None when no reader claims it.

  Every loader asks this first, so it also refuses what no loader could read, in one line:
  a web address or an unreachable gs:// path (handles.py), and a saved_model.pb that does not
  parse (saved_models.py; "no reader claims it" would send it on as one of our exports)."""
  handles.check_handle(path)
  saved_models.check_saved_model_file(path)
  for reader in readers().values():
    if reader.detect(path):
      return reader.format
  return None


def read(path, format_name=None, with_arrays=True):
  """`path` as ForeignWeights (its format detected unless given)."""
  format_name = format_name or detect(path)
  available = readers()
  if format_name not in available:
    raise ValueError(f"{path} is not an artifact albert-tf reads from another library "
                     f"({', '.join(r.description for r in available.values())})")
  return available[format_name].read(path, with_arrays=with_arrays)
