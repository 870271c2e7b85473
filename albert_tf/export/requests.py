"""Request validation shared by every serving signature.

A SavedModel served by TF Serving answers strangers. A malformed request must come back as an
INVALID_ARGUMENT whose message names the input and the rule ("text_a has 2 rows but text_b has
1"), not as an op name and a shape from deep inside the graph, and never as a wrong answer
(an out-of-range id is an error on a CPU but silently reads zeros on a GPU). So each signature
is made with `signature`, which declares its inputs and checks their rank first, and states its
other rules with the functions here, running its computation on `checked(...)` inputs:

    @signature(text_a="string [batch]", text_b="string [batch]")
    def text_pair(self, text_a, text_b):
      rules = same_rows(text_a=text_a, text_b=text_b)
      text_a, text_b = checked((text_a, text_b), rules)

The rules are `tf.debugging.Assert` ops inside the served graph, so they hold for every client
(TF Serving's REST and gRPC, `saved_model_cli`, `tf.saved_model.load`). `checked` makes the
inputs depend on them, so no op of the computation runs on a request that breaks one. XLA
drops Assert ops: a compiled signature checks its request in a plain function around the
compiled one (export/encoder.py).

Rank and dtype come first. A loaded signature called eagerly does not check the shape of the
tensors it is given (a [1, 1] tensor runs through a [None] signature), of Session clients only
Python's checks a feed against the placeholder's shape, and an in-graph rank rule on an input of
known rank is constant-folded away by grappler. So `signature` declares every input with an
unknown rank (its SignatureDef shows `unknown_rank` and the dtype) and checks the declared rank
(and any fixed size) in the graph before any other op reads the input: "text has rank 2 (shape
[1 1]); this signature takes string [batch] (rank 1)". A dtype cannot be checked in the graph
(a placeholder has one); a request of another dtype is refused by TensorFlow before any op
runs, in its own words: eagerly "input #k(zero-based) was expected to be a string tensor but is
a int32 tensor" (k: the input's place in the alphabetical order of the names) for a tensor, a
TypeError that shows the argument for a Python list or numpy array; through a Session the
client converts the fed array to the placeholder's dtype (numbers into a string input fail in
the client; TF1's `session.run` casts floats into an int32 input as numpy's `astype` does).
"""

import functools
import inspect

import tensorflow as tf


def rule(holds, message, *values):
  """An op that fails the request with INVALID_ARGUMENT "`message`" unless `holds` (a bool
  scalar). `message` is a `tf.strings.format` template, its `{}` filled with `values`."""
  text = tf.strings.format(message, values) if values else tf.constant(message)
  return tf.debugging.Assert(holds, [text])


def checked(inputs, rules):
  """`inputs` (a nest of tensors, ragged ones too) that exist only once `rules` have held."""
  with tf.control_dependencies(rules):
    return tf.nest.map_structure(tf.identity, inputs, expand_composites=True)


def _declared(declaration):
  """"int32 [batch, seq]" -> (tf.int32, ["batch", "seq"]); a number is a fixed size."""
  dtype, _, dims = declaration.partition(" ")
  dims = [d.strip() for d in dims.strip().strip("[]").split(",") if d.strip()]
  return tf.as_dtype(dtype), [int(d) if d.isdigit() else d for d in dims]


def _has_declared_shape(name, tensor, declaration):
  """A rule that `tensor` has the rank (and the fixed sizes) of `declaration`."""
  _, dims = _declared(declaration)
  shape = tf.shape(tensor)
  holds = tf.equal(tf.size(shape), len(dims))
  fixed = [(i, d) for i, d in enumerate(dims) if isinstance(d, int)]
  if fixed:  # read where the rank is right, else at -1s
    padded = tf.concat([shape, tf.fill([len(dims)], -1)], 0)
    holds &= tf.reduce_all(tf.equal(tf.gather(padded, [i for i, _ in fixed]),
                                    [d for _, d in fixed]))
  return rule(holds, f"{name} has rank {{}} (shape {{}}); this signature takes {declaration} "
                     f"(rank {len(dims)})", tf.size(shape), shape)


def signature(**declarations):
  """A decorator making `compute` a serving signature's `tf.function`, its inputs declared by
  name as "dtype [dims]" (a named dimension takes any size, a number only that one):

    @signature(text_a="string [batch]", text_b="string [batch]")
    def text_pair(self, text_a, text_b):  # a method, or a function
      ...  # text_a, text_b: string tensors of shape [None]

  The tf.function's input_signature is the declared dtypes with an unknown rank, each named, so
  the SignatureDef's inputs keep these names and dtypes; before anything else the graph checks
  that each input has its declared rank and fixed sizes (the module docstring says why, and
  what happens to another dtype), then calls `compute` with the inputs as keyword arguments,
  their static shapes set as declared. `compute` may take `**inputs` instead of the names.
  """
  declared = {name: _declared(d) for name, d in declarations.items()}
  specs = [tf.TensorSpec(None, dtype, name=name) for name, (dtype, _) in declared.items()]

  def decorate(compute):
    # The Python signature tf.function binds calls to: `compute`'s own leading parameters
    # (`self`) and the inputs, in declaration order, by position or by name.
    parameters = [p for p in inspect.signature(compute).parameters.values()
                  if p.name not in declared and p.kind != p.VAR_KEYWORD]
    parameters += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                   for name in declared]
    python_signature = inspect.Signature(parameters)

    @functools.wraps(compute)
    def serve(*args, **kwargs):
      arguments = python_signature.bind(*args, **kwargs).arguments
      request = {name: arguments.pop(name) for name in declared}
      request = checked(request, [_has_declared_shape(name, tensor, declarations[name])
                                  for name, tensor in request.items()])
      for name, tensor in request.items():
        tensor.set_shape([d if isinstance(d, int) else None for d in declared[name][1]])
      return compute(*arguments.values(), **request)

    serve.__signature__ = python_signature
    return tf.function(serve, input_signature=specs)
  return decorate


def _rows(tensor):
  if isinstance(tensor, tf.RaggedTensor):
    return tf.cast(tensor.nrows(), tf.int32)
  return tf.shape(tensor)[0]


def same_rows(**named):
  """Rules that every named input has as many rows (batch entries) as the first one."""
  (first, reference), *others = named.items()
  n = _rows(reference)
  return [rule(tf.equal(_rows(tensor), n), f"{name} has {{}} rows but {first} has {{}}",
               _rows(tensor), n) for name, tensor in others]


def _first(bad):
  """Index of the first True of a bool vector (0 if none, or if it is empty)."""
  return tf.argmax(tf.concat([tf.cast(bad, tf.int32), [0]], 0), output_type=tf.int32)


def _at(values, index):
  """values[index], or a zero where `values` is empty (an empty batch still builds the
  message of a rule that holds)."""
  return tf.gather(tf.concat([values, tf.zeros([1], values.dtype)], 0), index)


def every_row(holds, message, *values):
  """A rule that `holds` (bool [batch]) for every row. `message` names the first row that
  breaks it: its first `{}` is that row's index, the others take `values` (each [batch],
  read at that row)."""
  row = _first(tf.logical_not(holds))
  return rule(tf.reduce_all(holds), message, row, *[_at(v, row) for v in values])


def has_tokens(name, ids):
  """A rule that every row of `ids` (ragged [batch, (tokens)], a text's tokens) has some."""
  return every_row(ids.row_lengths() > 0,
                   f"{name} row {{}} has no tokens (it is empty or only whitespace)")


def same_shape(**named):
  """Rules that every named tensor has the first one's shape."""
  (first, reference), *others = named.items()
  shape = tf.shape(reference)
  return [rule(tf.reduce_all(tf.equal(tf.shape(tensor), shape)),
               f"{name} has shape {{}} but {first} has {{}}", tf.shape(tensor), shape)
          for name, tensor in others]


def values_in(name, tensor, low, high, what, source=""):
  """A rule that every value of the int `tensor` lies in [low, high) (`high` an int or a
  scalar tensor); `what` says what the values are, `source` where the bound comes from."""
  flat = tf.reshape(tensor, [-1])
  high = tf.cast(high, flat.dtype)
  outside = (flat < low) | (flat >= high)
  at = _first(outside)
  index = tf.unravel_index(at, tf.maximum(tf.shape(tensor, out_type=tf.int32), 1))
  return rule(tf.logical_not(tf.reduce_any(outside)),
              f"{name} holds {{}} at {{}}; {what} must be in [{int(low)}, {{}}){source}",
              _at(flat, at), index, high)


def columns_within(name, tensor, low, high, what):
  """A rule that `tensor` ([batch, seq, ...]) has between low and high columns."""
  columns = tf.shape(tensor)[1]
  return rule((columns >= low) & (columns <= high),
              f"{name} has {{}} columns; {what}", columns)


def encoder_inputs(inputs, config):
  """The rules of the encoder's three inputs (int32 [batch, seq] each) under `config`.

  Same shape; between 1 and max_position_embeddings columns; word ids inside the vocabulary,
  type ids inside type_vocab_size, a mask of 0s and 1s (any other value would change the
  attention bias, not fail).
  """
  word, mask, types = inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"]
  rules = same_shape(input_word_ids=word, input_mask=mask, input_type_ids=types)
  rules.append(columns_within(
      "input_word_ids", word, 1, config.max_position_embeddings,
      f"this model reads 1 to {config.max_position_embeddings} tokens per row "
      f"(max_position_embeddings)"))
  rules.append(values_in("input_word_ids", word, 0, config.vocab_size, "word ids",
                         " (vocab_size)"))
  rules.append(values_in("input_type_ids", types, 0, config.type_vocab_size, "segment ids",
                         " (type_vocab_size)"))
  rules.append(values_in("input_mask", mask, 0, 2, "mask values"))
  return rules
