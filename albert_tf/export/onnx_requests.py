"""The requests an ONNX file's model takes: its limits written into the file at export, and the
SavedModels' request rules applied before ONNX Runtime runs (issue 57).

An ONNX file has no request checks of its own, and ONNX Runtime's answers to a bad request are
either wrong or unreadable: its Gather counts a negative index from the end (-1 reads the last
token's embedding, and the outputs look normal), a mask value of 2 scales the attention's bias
instead of failing, and the faults it does catch are named by graph nodes
(`encoder/embeddings/Gather`, `.../add_1`) or are an "Unexpected input data type" without the
input's name. So the export records the model's limits in the file's `metadata_props`
(`request_metadata`), and `check_request` refuses, before the session runs, what the
SavedModels refuse (export/requests.py), in their words: one `RequestError` naming the input,
the fault and the limit.

A file written before the limits were recorded still runs: the rules that need no limit (the
inputs' names, dtypes, ranks and shapes, a column at least, no negative id or position, a mask
of 0s and 1s) are checked; an id past the vocabulary or a row past max_position_embeddings is
then left to ONNX Runtime, which fails on both (docs/onnx.md), with its own words.
"""

import numpy as np

from albert_tf.modeling.token_classifier import WORD_POSITIONS

# The config's limits a request is checked against; each is a key of the file's metadata_props.
LIMITS = ("vocab_size", "type_vocab_size", "max_position_embeddings")

# What each input's values are and their upper bound: a key of LIMITS, a number, or "seq" (a
# position inside the row). The lower bound is 0 for every one.
VALUES = {
    "input_word_ids": ("word ids", "vocab_size"),
    "input_type_ids": ("segment ids", "type_vocab_size"),
    "input_mask": ("mask values", 2),
    "p_mask": ("p_mask values", 2),
    WORD_POSITIONS: ("word positions", "seq"),
}
# Inputs of input_word_ids' shape; word_positions has its rows only.
SAME_SHAPE = ("input_mask", "input_type_ids", "p_mask")
_INT32 = np.iinfo(np.int32)


class RequestError(ValueError):
  """A request the model cannot answer; the message names the input, the fault and the limit
  (as the SavedModels' INVALID_ARGUMENT does)."""


def declaration(name, rank):
  """The input's declaration in requests.py's form: "int32 [batch, seq]"."""
  if name == WORD_POSITIONS:
    return "int32 [batch, words]"
  return "int32 [batch, choices, seq]" if rank == 3 else "int32 [batch, seq]"


def request_metadata(config, specs):
  """The ONNX file's `metadata_props` (str -> str) for a model of `config` taking `specs`: each
  of LIMITS (what `check_request` reads back), and under each input's name what it takes, in
  VALUES' words, for a reader of the file (Netron, `session.get_modelmeta()`)."""
  metadata = {key: str(int(getattr(config, key))) for key in LIMITS}
  for spec in specs:
    what, high = VALUES[spec.name]
    bound = f"{getattr(config, high)}) ({high}" if high in LIMITS else high
    metadata[spec.name] = f"{declaration(spec.name, spec.shape.rank)}: {what} in [0, {bound})"
  return metadata


def recorded_limits(runner):
  """{key: int} of LIMITS that the session's file records; {} for a file written before."""
  recorded = runner.get_modelmeta().custom_metadata_map
  return {key: int(recorded[key]) for key in LIMITS if key in recorded}


def _shape(array):
  return "[" + " ".join(str(d) for d in array.shape) + "]"


def _integers(name, value, rank):
  """`value` as a numpy integer array of `rank` dims, or a RequestError naming the fault."""
  array = np.asarray(value)
  wanted = declaration(name, rank)
  if array.dtype.kind not in "iu":  # float ids would be truncated, bools are not ids
    raise RequestError(f"{name} has dtype {array.dtype}; this model takes {wanted} (any "
                       "integer dtype is converted when its values fit int32)")
  if array.ndim != rank:
    raise RequestError(f"{name} has rank {array.ndim} (shape {_shape(array)}); this model "
                       f"takes {wanted} (rank {rank})")
  return array


def _bound(high, limits, ids):
  """(upper bound, where it comes from) of values bounded by `high` (VALUES' second item, None
  for an input it does not know): int32's where the file does not record the limit, so that
  the conversion to int32 stays lossless."""
  if high == "seq" and ids is not None:
    return ids.shape[-1], ""
  if high in LIMITS:
    if high in limits:
      return limits[high], f" ({high})"
    return _INT32.max + 1, f" (int32; this file does not record {high})"
  if isinstance(high, int):
    return high, ""
  return _INT32.max + 1, " (int32)"


def _values_in(name, array, what, high, source):
  """Refuses the first value of `array` outside [0, high), naming it and where it is."""
  outside = (array < 0) | (array >= high)
  if outside.any():
    at = np.unravel_index(np.argmax(outside), array.shape)
    raise RequestError(f"{name} holds {array[at]} at [{' '.join(str(i) for i in at)}]; "
                       f"{what} must be in [0, {high}){source}")


def check_request(runner, inputs):
  """`inputs` (a dict of arrays or nested lists) as the int32 numpy arrays the session `runner`
  takes, once they keep the SavedModels' rules; otherwise a RequestError.

  Every input of the model present and no other; integers (int64, numpy's default, is
  converted, losslessly once the values are checked), each of its rank; input_mask,
  input_type_ids (and p_mask) of input_word_ids' shape, word_positions of its rows; 1 to
  max_position_embeddings columns; word ids in [0, vocab_size), type ids in
  [0, type_vocab_size), mask (and p_mask) values 0 or 1, word positions inside the row. The
  limits are the file's (`recorded_limits`); a file without them is checked against int32's.
  """
  ranks = {i.name: len(i.shape) for i in runner.get_inputs()}
  takes = ", ".join(ranks)
  for name in inputs:
    if name not in ranks:
      raise RequestError(f"{name} is not an input of this model; it takes {takes}")
  for name in ranks:
    if name not in inputs:
      raise RequestError(f"{name} is missing; this model takes {takes}")
  arrays = {name: _integers(name, inputs[name], rank) for name, rank in ranks.items()}
  limits = recorded_limits(runner)
  ids = arrays.get("input_word_ids")
  if ids is not None:
    for name in SAME_SHAPE:
      if name in arrays and arrays[name].shape != ids.shape:
        raise RequestError(f"{name} has shape {_shape(arrays[name])} but input_word_ids has "
                           f"{_shape(ids)}")
    if WORD_POSITIONS in arrays and len(arrays[WORD_POSITIONS]) != len(ids):
      raise RequestError(f"{WORD_POSITIONS} has {len(arrays[WORD_POSITIONS])} rows but "
                         f"input_word_ids has {len(ids)}")
    columns, most = ids.shape[-1], limits.get("max_position_embeddings")
    if columns < 1 or (most is not None and columns > most):
      reads = (f"1 to {most} tokens per row (max_position_embeddings)" if most is not None
               else "at least 1 token per row")
      raise RequestError(f"input_word_ids has {columns} columns; this model reads {reads}")
  for name, array in arrays.items():
    what, high = VALUES.get(name, ("values", None))
    _values_in(name, array, what, *_bound(high, limits, ids))
  return {name: array.astype(np.int32) for name, array in arrays.items()}
