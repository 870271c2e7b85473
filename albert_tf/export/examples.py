"""Serialized tf.train.Examples as requests: what the task exports' `serve_examples` read.

Batch inference pipelines (Beam's RunInference, TFX's BulkInferrer) send a signature one string
input of serialized tf.train.Examples, as Model Garden's serving modules take them. A task
export's `serve_examples(examples)` reads from each Example the features its text signature
takes, by the same names, as bytes_list features, and runs that signature's computation on
them, so the answers are the text signature's:

    example = tf.train.Example(features=tf.train.Features(feature={
        "text_a": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a gripping film"]))}))
    loaded.signatures["serve_examples"](examples=tf.constant([example.SerializeToString()]))

Features the signature does not read (a label, an id) are ignored. An Example holding another
number of values of a feature than the signature reads (none: it lacks the feature) is an
INVALID_ARGUMENT naming the row and the feature (export/requests.py): "examples row 1 holds 0
values of feature text_a; this signature reads 1". Two errors come from the parse itself, in
TensorFlow's words, which name what is wrong: a feature of another type, with its row ("Key:
text_a, Index: 1.  Data types don't match. Expected type: string, Actual type: int64"), and a
string that is no serialized Example, such as raw text sent here ("Could not parse example
input, value: 'a gripping film'"). Protocol buffers skip what they do not know, so some bytes
that were never an Example parse as one without features: those are named as lacking them.
"""

import tensorflow as tf

from albert_tf.export import requests


def parse_examples(examples, counts, optional=()):
  """The string features of `examples` (string [batch], serialized tf.train.Examples).

  `counts`: {name: n}, features every Example must hold n values of; each comes back as
  [batch] when n is 1, else [batch, n]. `optional`: names of features an Example may hold one
  value of or lack; each comes back as [batch], "" where it is lacking.
  """
  parsed = tf.io.parse_example(
      examples, {name: tf.io.RaggedFeature(tf.string) for name in [*counts, *optional]})
  found = {name: tf.cast(values.row_lengths(), tf.int32) for name, values in parsed.items()}
  rules = [requests.every_row(tf.equal(found[name], n), f"examples row {{}} holds {{}} values "
                              f"of feature {name}; this signature reads {n}", found[name])
           for name, n in counts.items()]
  rules += [requests.every_row(found[name] <= 1, f"examples row {{}} holds {{}} values of "
                               f"feature {name}; this signature reads 1, or none (an empty "
                               f"{name})", found[name])
            for name in optional]
  parsed = requests.checked(parsed, rules)
  features = {name: tf.reshape(parsed[name].flat_values, [-1] if n == 1 else [-1, n])
              for name, n in counts.items()}
  for name in optional:
    features[name] = parsed[name].to_tensor("", shape=[None, 1])[:, 0]
  return features
