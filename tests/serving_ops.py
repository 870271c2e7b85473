"""TF Serving's stock image can run every export as it is: each op type in an export's graph and
in its function library is registered by core TensorFlow or by tensorflow-text, from one of the
op libraries TF Serving's model server links, and by nothing else (no op of ours).

Which is which is read from the op registry, not guessed: a fresh Python process lists the ops
`import tensorflow` registers, then loads each of tensorflow-text's op libraries (`_<name>.so`)
and lists the ops each adds. TF Serving 2.20.0 links `@org_tensorflow_text//tensorflow_text:
ops_lib` into `tensorflow_model_server` (`SUPPORTED_TENSORFLOW_OPS` in
tensorflow_serving/model_servers/BUILD), and that target's deps (tensorflow/text v2.20.0,
tensorflow_text/BUILD) are the `<name>_cc` libraries named in OPS_LIB below.
The exports are conftest.py's tiny ones, and test_serving_requests.py's preprocessing model.
"""

import json
import pathlib
import subprocess
import sys

import pytest
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.export.preprocessing import save_preprocessing_model

# Collected by test_serving_requests.py (see there why): what it imports.
__all__ = [
    "registered_ops",
    "wordpiece_preprocessing_export",
    "test_tf_serving_links_every_op_library_of_the_installed_tensorflow_text",
    "test_every_op_of_an_export_is_core_tensorflows_or_tf_servings_tensorflow_text",
]

# The deps of tensorflow-text's `ops_lib` target (v2.20.0, tensorflow_text/BUILD), without their
# `_cc` suffix: the op libraries TF Serving's model server links. Each is the pip package's
# `_<name>.so`; all of the package's libraries are here (tensorflow-text 2.20.0 and 2.20.1).
OPS_LIB = frozenset([
    "boise_offset_converter", "byte_splitter", "constrained_sequence_op", "fast_bert_normalizer",
    "fast_sentencepiece_tokenizer", "fast_wordpiece_tokenizer", "mst_ops", "ngrams_op",
    "normalize_ops", "phrase_tokenizer", "regex_split_ops", "sentence_breaking_ops",
    "sentencepiece_tokenizer", "split_merge_from_logits_tokenizer", "split_merge_tokenizer",
    "state_based_sentence_breaker_op", "text_similarity_metric_ops", "trimmer_ops",
    "unicode_script_tokenizer", "utf8_binarize_op", "whitespace_tokenizer",
    "whitespace_tokenizer_v2", "wordpiece_tokenizer",
])

# tensorflow-text's ops in each export; the rest of its ops are core TensorFlow's. They sit in
# the function library (the graph's own nodes are mostly calls), so finding them there also
# shows the library is read. The SQuAD and NER (whitespace) exports cut words with
# RegexSplitWithOffsets; a WordPiece vocabulary (albert_zh) tokenizes with
# FastWordpieceTokenizeWithOffsets.
SPM = "TFText>FastSentencepieceTokenize"
TEXT_OPS = {
    "encoder": set(),
    "preprocessing": {SPM},
    "wordpiece_preprocessing": {"FastWordpieceTokenizeWithOffsets"},
    "fill_mask": {SPM},
    "classifier": {SPM},
    "embed": {SPM},
    "squad": {SPM, "RegexSplitWithOffsets"},
    "race": {SPM},
    "ner": {SPM, "RegexSplitWithOffsets"},
    "ner_crf": {SPM, "RegexSplitWithOffsets"},
}

# Run in a fresh interpreter, so that nothing this test process imported registers an op.
_REGISTRY_PROBE = r"""
import importlib.util, json, pathlib, sys
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session

def registered():
  ops = op_def_pb2.OpList()
  ops.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
  return {op.name for op in ops.op}

core = registered()
package = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
assert "tensorflow_text" not in sys.modules
text = {}
for library in sorted(pathlib.Path(package).rglob("_*.so")):
  before = registered()
  tf.load_op_library(str(library))
  text.update(dict.fromkeys(registered() - before, library.name[1:-len(".so")]))
import tensorflow_text  # anything it registers beyond its libraries
unattributed = registered() - core - set(text)
print(json.dumps({"core": sorted(core), "text": text, "unattributed": sorted(unattributed)}))
"""


@pytest.fixture(scope="module")
def registered_ops():
  """(ops `import tensorflow` registers, {op: tensorflow-text library registering it})."""
  probe = subprocess.run([sys.executable, "-c", _REGISTRY_PROBE], capture_output=True,
                         text=True, timeout=300, check=False)
  assert probe.returncode == 0, probe.stderr[-3000:]
  found = json.loads(probe.stdout.strip().splitlines()[-1])
  assert not found["unattributed"], (
      f"import tensorflow_text registers ops none of its op libraries does: "
      f"{found['unattributed']}")
  assert "TFText>FastSentencepieceTokenize" not in found["core"]
  return frozenset(found["core"]), found["text"]


@pytest.fixture(scope="module")
def wordpiece_preprocessing_export(tiny_vocab_file, tmp_path_factory):
  """A preprocessing model on a WordPiece vocab.txt (albert_zh's kind): the in-graph WordPiece
  tokenizer every vocab-based export shares."""
  export_dir = save_preprocessing_model(str(tmp_path_factory.mktemp("pre_wp") / "export"),
                                        vocab_file=str(tiny_vocab_file), max_seq_length=8)
  return None, export_dir, None


def op_types(export_dir):
  """The op types of every meta graph's nodes and its function library's nodes, less the calls
  of the library's own functions (a node whose op is a function's name)."""
  saved_model = saved_model_pb2.SavedModel()
  saved_model.ParseFromString((pathlib.Path(export_dir) / "saved_model.pb").read_bytes())
  ops = set()
  for meta_graph in saved_model.meta_graphs:
    library = meta_graph.graph_def.library
    found = {node.op for node in meta_graph.graph_def.node}
    for function in library.function:
      found.update(node.op for node in function.node_def)
    ops |= found - {function.signature.name for function in library.function}
  return ops


def test_tf_serving_links_every_op_library_of_the_installed_tensorflow_text(registered_ops):
  _, text = registered_ops
  assert "fast_sentencepiece_tokenizer" in text.values()
  assert set(text.values()) <= OPS_LIB, (
      f"tensorflow-text's libraries {sorted(set(text.values()) - OPS_LIB)} are not among "
      "those TF Serving 2.20 links (tensorflow_text:ops_lib)")


@pytest.mark.parametrize("kind", list(TEXT_OPS))
def test_every_op_of_an_export_is_core_tensorflows_or_tf_servings_tensorflow_text(
    request, registered_ops, kind):
  core, text = registered_ops
  ops = op_types(request.getfixturevalue(f"{kind}_export")[1])
  assert ops & core, "no core op found: the graph was not read"
  unregistered = sorted(ops - core - set(text))
  assert not unregistered, (
      f"the {kind} export uses ops neither TensorFlow nor tensorflow-text registers (TF "
      f"Serving's model server would refuse to load it): {unregistered}")
  from_text = {op: text[op] for op in ops if op in text}
  assert set(from_text) == TEXT_OPS[kind], (
      f"the {kind} export's tensorflow-text ops are {from_text}, not {TEXT_OPS[kind]}")
  unlinked = {op: library for op, library in from_text.items() if library not in OPS_LIB}
  assert not unlinked, (
      f"the {kind} export uses tensorflow-text ops from libraries that tensorflow_text:ops_lib "
      f"(linked by TF Serving) does not depend on: {unlinked}")
