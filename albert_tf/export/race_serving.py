"""A multiple-choice (RACE) SavedModel for serving: article, question, options in, the answer out.

    export_multiple_choice(model, "/tmp/race", spm_model_file="30k-clean.model")
    tf.saved_model.load("/tmp/race").signatures["serving_default"](
        article=tf.constant(["Tom went to the park ..."]),
        question=tf.constant(["Tom went to the _ ."]),
        options=tf.constant([["park", "zoo", "school", "shop"]]))
    # {"probabilities": [[...4 floats...]], "answer_index": [0]}

The graph does what `data.race` does in Python (the original run_race.py), in the same order:
in SentencePiece mode article, question and each option are `preprocess_text`-ed first
(WordPiece keeps them as they are); the blank test `"_" in question` is made on that
processed question, so a fullwidth "＿" that NFKD turns into "_" is a blank here exactly when
it is one in Python; choice j's text is `qa_text(question, option_j)`, whose tokens keep their
LAST `max_qa_length`; the article's tokens are cut so `[CLS] article [SEP] qa [SEP]` fits
`max_seq_length`. The qa text is then tokenized like any text, so it is preprocessed a second
time, as `FullTokenizer.tokenize` does in Python.
"""

import tensorflow as tf

from albert_tf.export import requests
from albert_tf.export.examples import parse_examples
from albert_tf.export.saving import save_atomically
from albert_tf.export.task_models import trim_padding
from albert_tf.modeling.encoder import INPUT_NAMES
from albert_tf.tokenization.in_graph import (InGraphTokenizer, contains, gather_runs, pack_inputs,
                                             row_prefixes)

_BLANK = "_"


def _fill_blanks(questions, options):
  """`question.replace("_", option)` for each choice: questions [n], options [n] -> [n]."""
  parts = tf.strings.split(questions, _BLANK)  # [n, (blanks + 1)]
  option_of_part = tf.repeat(options, parts.row_lengths())
  position = tf.range(tf.size(parts.flat_values, out_type=tf.int64)) - tf.repeat(
      parts.row_starts(), parts.row_lengths())
  is_last = tf.equal(position, tf.repeat(parts.row_lengths() - 1, parts.row_lengths()))
  pieces = tf.where(is_last, parts.flat_values, parts.flat_values + option_of_part)
  return tf.strings.reduce_join(parts.with_flat_values(pieces), axis=1)


def _suffix(ids, lengths):
  """The last `lengths[i]` ids of each row."""
  values = gather_runs(ids.values, ids.row_limits() - lengths, lengths)
  return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)


class MultipleChoiceServing(tf.Module):
  """Raw strings -> the model's answer; see the module docstring for the packing.

  `serving_default(article, question, options)`: string [batch], [batch], [batch, choices] ->
  `probabilities` float32 [batch, choices] (softmax of the logits), `answer_index` int32
  [batch]. `pack(article, question, options)` gives the model inputs it runs on, int32
  [batch, choices, max_seq_length] each (as `data.race.convert_example`). Inputs of different
  row counts, or options with another number of choices than the model's, are an
  INVALID_ARGUMENT naming the input (export/requests.py). `serve_examples(examples)` answers
  the same from serialized tf.train.Examples holding an article and a question bytes feature
  and an options feature of num_choices values (export/examples.py).
  """

  def __init__(self, model, tokenizer, num_choices=4, max_seq_length=512, max_qa_length=128):
    super().__init__(name="multiple_choice")
    if max_qa_length > max_seq_length - 3:
      # Python would then write [CLS] [SEP] qa [SEP] longer than max_seq_length.
      raise ValueError(f"max_qa_length ({max_qa_length}) must leave room for [CLS] and two "
                       f"[SEP] in max_seq_length ({max_seq_length})")
    # Only the variables are saved, not the Keras model: saving a tracked Keras model traces
    # all its call functions again (the tiny test export: 19 s instead of 8 s), for no use here.
    self._logits = lambda inputs: model(inputs, training=False)
    self.model_variables = list(model.variables)
    self.tokenizer = tokenizer
    self.num_choices = num_choices
    self.max_seq_length, self.max_qa_length = max_seq_length, max_qa_length
    # Any number of choices, so that a wrong one is named (export/requests.py).
    request = requests.signature(article="string [batch]", question="string [batch]",
                                 options="string [batch, choices]")
    self.pack = request(self._pack)
    self.serve = request(self._serve)
    self.serve_examples = requests.signature(examples="string [batch]")(self._serve_examples)

  def _process_text(self, strings):
    """`data.race.process_text`: preprocess_text for SentencePiece, as is for WordPiece."""
    return self.tokenizer.preprocess_text(strings) if self.tokenizer.is_spm else strings

  def _pack(self, article, question, options):
    choices = self.num_choices
    rules = requests.same_rows(article=article, question=question, options=options)
    rules.append(requests.rule(tf.equal(tf.shape(options)[1], choices),
                               f"options has {{}} choices per row; this model takes {choices} "
                               f"(num_choices)", tf.shape(options)[1]))
    article, question, options = requests.checked((article, question, options), rules)
    article, question = self._process_text(article), self._process_text(question)
    options = self._process_text(tf.reshape(options, [-1]))  # [batch * choices], row-major
    questions = tf.repeat(question, choices)
    qa = tf.where(tf.repeat(contains(question, _BLANK), choices),
                  _fill_blanks(questions, options),
                  tf.strings.join([questions, options], separator=" "))
    qa_ids = self.tokenizer.tokenize(qa)
    qa_ids = _suffix(qa_ids, tf.minimum(qa_ids.row_lengths(), self.max_qa_length))
    context = self.tokenizer.tokenize(article)
    context = tf.gather(context, tf.repeat(tf.range(tf.shape(article)[0]), choices))
    room = self.max_seq_length - 3 - qa_ids.row_lengths()
    context = row_prefixes(context, tf.minimum(context.row_lengths(), room))
    # Both parts already fit, so pack_inputs cuts nothing: [CLS] article [SEP] qa [SEP].
    # The original's RACE packing writes B's [SEP] even for an empty qa (race_utils.py).
    inputs = pack_inputs(context, qa_ids, max_seq_length=self.max_seq_length,
                         cls_id=self.tokenizer.cls_id, sep_id=self.tokenizer.sep_id,
                         has_b=tf.ones_like(qa_ids.row_lengths(), tf.bool))
    shape = [-1, choices, self.max_seq_length]
    return {name: tf.reshape(inputs[name], shape) for name in INPUT_NAMES}

  def _serve(self, article, question, options):
    # Computed at the request's longest packed choice (`trim_padding`); `pack` keeps
    # max_seq_length, as data.race writes the records.
    inputs = trim_padding(self._pack(article, question, options))
    logits = tf.cast(self._logits(inputs), tf.float32)
    return {"probabilities": tf.nn.softmax(logits),
            "answer_index": tf.argmax(logits, -1, output_type=tf.int32)}

  def _serve_examples(self, examples):
    return self._serve(**parse_examples(
        examples, {"article": 1, "question": 1, "options": self.num_choices}))


def export_multiple_choice(model, export_dir, num_choices=4, spm_model_file=None,
                           vocab_file=None, do_lower_case=True, max_seq_length=512,
                           max_qa_length=128):
  """Writes a raw-text multiple-choice SavedModel of `model` (an `AlbertMultipleChoice`);
  returns `export_dir`. Signatures `serving_default(article, question, options)` and
  `serve_examples(examples)`; the loaded object's `pack` gives the packed ids."""
  tokenizer = InGraphTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                               do_lower_case=do_lower_case)
  module = MultipleChoiceServing(model, tokenizer, num_choices, max_seq_length, max_qa_length)
  return save_atomically(module, export_dir, {
      "serving_default": module.serve.get_concrete_function(),
      "serve_examples": module.serve_examples.get_concrete_function()}, num_choices=num_choices)
