"""Shared pytest set-up: import paths, quiet TensorFlow, real-data locations."""

import contextlib
import gc
import os
import pathlib
import socket
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

ROOT = pathlib.Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
  if str(path) not in sys.path:
    sys.path.insert(0, str(path))

# ../shared/data beside the checkout; ALBERT_TF_SHARED_DATA names it for a copy of the project
# elsewhere (tools/mutation.py runs the tests in mutmut's copy, mutants/).
SHARED_DATA = pathlib.Path(os.environ.get("ALBERT_TF_SHARED_DATA",
                                          ROOT.parent / "shared" / "data"))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def shared_data():
  """../shared/data: real corpora, GLUE, SentencePiece models (read-only)."""
  if not SHARED_DATA.is_dir():
    raise FileNotFoundError(f"real test data not found at {SHARED_DATA} (its README says "
                            "what it holds)")
  return SHARED_DATA


# The tokenizers of the in-graph tests (test_in_graph_tokenizer.py, test_preprocessing_graph.py),
# built once for both: the graph one and the Python one it must equal, SentencePiece on the real
# model and WordPiece on in_graph_support.TINY_VOCAB, lowercasing.


@pytest.fixture(scope="session")
def spm_graph(shared_data):
  from albert_tf.tokenization import in_graph  # pylint: disable=g-import-not-at-top
  return in_graph.InGraphTokenizer(spm_model_file=shared_data / "sentencepiece" / "spiece.model",
                                   do_lower_case=True)


@pytest.fixture(scope="session")
def spm_python(shared_data):
  from albert_tf.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  return FullTokenizer(spm_model_file=shared_data / "sentencepiece" / "spiece.model",
                       do_lower_case=True)


@pytest.fixture(scope="session")
def tiny_vocab_file(tmp_path_factory):
  from in_graph_support import TINY_VOCAB  # pylint: disable=g-import-not-at-top
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  path.write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
  return path


@pytest.fixture(scope="session")
def tiny_graph(tiny_vocab_file):
  from albert_tf.tokenization import in_graph  # pylint: disable=g-import-not-at-top
  return in_graph.InGraphTokenizer(vocab_file=tiny_vocab_file, do_lower_case=True)


@pytest.fixture(scope="session")
def tiny_python(tiny_vocab_file):
  from albert_tf.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  return FullTokenizer(vocab_file=tiny_vocab_file, do_lower_case=True)


@pytest.fixture(scope="module", autouse=True)
def _sessions_closed_after_each_module():
  """The TF1 Sessions serving_requests.py keeps per export (a copy of its graph each) live
  only as long as the module that used them: a test process would otherwise carry every one
  it ever opened."""
  yield
  helpers = sys.modules.get("serving_requests")
  if helpers is not None:
    helpers.close_sessions()
  # Everything frozen by the tests' collections below is looked at again once per module: the
  # module's fixtures (and what only they kept) are garbage now.
  gc.unfreeze()
  gc.collect()
  gc.freeze()


@pytest.fixture(autouse=True)
def _garbage_collected_after_each_test():
  """After each test, the reference cycles it left are collected: a loaded SavedModel's objects
  form cycles (and a failed request's traceback keeps the frames that hold it), and its graphs,
  and the gradient registrations `load_saved_model` releases with it, go only when the object
  is collected; Python's full collection comes too rarely to keep a test process small.

  What survives a collection is frozen (`gc.freeze`): TensorFlow's modules, the session's and
  module's fixtures, traced graphs. The next test's collection then walks only the objects
  created since, rather than every object of the process again (test_task_models.py and
  test_saved_model_loading.py: 3.3 s of teardown in all instead of 6.4 s); the module's end
  collects the frozen ones too."""
  yield
  gc.collect()
  gc.freeze()


def as_from_a_terminal():
  """A `preexec_fn` for a job that a test stops with SIGINT: Ctrl-C's default action, as in a
  terminal. A suite started as a background job (`cmd &`, nohup) ignores SIGINT, and its
  children inherit that; the jobs rightly keep an ignored SIGINT ignored."""
  import signal  # pylint: disable=g-import-not-at-top
  signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def reserved_ports(count):
  """`count` free TCP ports, held for servers the test starts until the block ends.

  A port found free and released before a server binds it can be taken in between (by another
  test's server, by any connection's ephemeral port). Each port here stays bound by a socket
  that does not listen, with SO_REUSEADDR: the kernel gives it to no one else, while a server
  binding it with SO_REUSEADDR too (uvicorn's, gRPC's, TensorFlow's gRPC server) shares the
  address and, listening, takes its connections.
  """
  with contextlib.ExitStack() as held:
    ports = []
    for _ in range(count):
      sock = held.enter_context(socket.socket())
      sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
      sock.bind(("127.0.0.1", 0))
      ports.append(sock.getsockname()[1])
    yield ports


def float32_atol(reference, terms, ulps=4):
  """An absolute tolerance for float32 results that two graphs or kernel libraries (Eigen,
  oneDNN, any thread count) may sum in other orders: `ulps` units in the last place of the
  largest finite magnitude in `reference`, times `terms`, the length of the longest chain of
  additions behind each value (each may round by up to half an ulp of the running sum).
  Infinities (log-probabilities of masked positions) must match exactly and set no scale."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  values = np.abs(np.asarray(reference, np.float64))
  largest = np.max(values[np.isfinite(values)], initial=0.0)
  return ulps * float(np.spacing(np.float32(largest))) * terms


def adamw_step_bound(lr, steps, weights):
  """The most AlbertAdamW (beta_1 0.9, beta_2 0.999, weight decay 0.01) moves a weight in
  `steps` steps at `lr`, from `weights`: step t by at most lr |m_t| / sqrt(v_t) <= lr (1 - beta_1)
  sqrt(t) / sqrt(1 - beta_2) (Cauchy-Schwarz on the sums of g and g^2), plus weight decay's
  lr 0.01 |w|."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  return sum(lr * (0.1 * np.sqrt(t) / np.sqrt(0.001) + 0.01 * np.abs(weights).max())
             for t in range(1, steps + 1))


def assert_moved_at_most(model, start_prefix, names, atol):
  """The weights `names` (TF1 names) of a trained `model` moved from the start checkpoint's
  (some element of each by more than float32 rounding, one spacing of its start value: a run
  that trained nothing, or froze them, or saved the start again, fails) and by no more than
  `atol`."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.interop.tf1_names import tf1_variable_map  # pylint: disable=g-import-not-at-top
  start = tf.train.load_checkpoint(start_prefix)
  variables = tf1_variable_map(model)
  for name in names:
    before = start.get_tensor(name)
    after = variables[name].numpy()
    np.testing.assert_allclose(after, before, atol=atol, err_msg=name)
    assert np.any(np.abs(after - before) > np.spacing(np.abs(before))), f"{name} did not move"


def clue_dev_as_test(task_dir, folder):
  """`folder` made a copy of the CLUE task folder `task_dir` (its files linked) whose test.json
  is the dev rows that have a gold label (CLUE's "-" rows, skipped in dev, are left out), each
  with its position as id: a run predicting its test split writes labels for exactly the
  sentences its dev metrics count. Returns those rows."""
  import json  # pylint: disable=g-import-not-at-top
  folder = pathlib.Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  for path in pathlib.Path(task_dir).glob("*.json"):
    if path.name != "test.json":
      (folder / path.name).symlink_to(path)
  rows = [json.loads(line) for line in
          (pathlib.Path(task_dir) / "dev.json").read_text(encoding="utf-8").splitlines()]
  rows = [dict(row, id=i) for i, row in enumerate(r for r in rows if r["label"] != "-")]
  (folder / "test.json").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n"
                                            for row in rows), encoding="utf-8")
  return rows


def randomised(model, seed):
  """`model` with distinct non-trivial values everywhere (biases and LayerNorm betas too, gammas
  around 1), so that a weight mapped to the wrong place changes the outputs."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for i, variable in enumerate(model.variables):
    variable.assign(tf.random.stateless_normal(variable.shape, [seed, i]) * 0.2
                    + (1.0 if "gamma" in variable.name else 0.0))
  return model


def encoder_inputs(vocab_size, batch=2, seq=9, seed=3, lowest_id=4):
  """The encoder's three int32 inputs: random ids from `lowest_id` on, the second row padded
  after 6 tokens, segment 1 from position 4."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  mask = np.ones((batch, seq), np.int32)
  mask[1, 6:] = 0
  return {"input_word_ids": tf.constant(rng.integers(lowest_id, vocab_size, (batch, seq)) * mask,
                                        tf.int32),
          "input_mask": tf.constant(mask),
          "input_type_ids": tf.constant((np.arange(seq)[None] >= 4) * mask, tf.int32)}


def encode_with_masks_python(tokenizer, text):
  """The Python side of the fill-mask export's `encode_with_masks`: the ids of `text`, each
  literal [MASK] as the mask id, the text between them tokenized piece by piece."""
  from albert_tf.export.task_models import MASK_TOKEN  # pylint: disable=g-import-not-at-top
  ids = []
  for i, part in enumerate(text.split(MASK_TOKEN)):
    if i:
      ids.append(tokenizer.mask_id)
    ids += tokenizer.encode_ids([part])[0]
  return ids


def sentence_embeddings_python(encoder, tokenizer, texts, seq):
  """The Python side of the `embed` signatures: (mean over the mask of sequence_output,
  pooled_output) in numpy, from the Keras `encoder` on `tokenizer`'s packing of each text
  alone, padded to `seq`."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.tokenization import encode_pair  # pylint: disable=g-import-not-at-top
  features = [encode_pair(tokenizer, text, None, seq) for text in texts]
  mask = np.array([f["input_mask"] for f in features], np.int32)
  outputs = encoder({"input_word_ids": tf.constant([f["input_ids"] for f in features]),
                     "input_mask": tf.constant(mask),
                     "input_type_ids": tf.constant([f["segment_ids"] for f in features])},
                    training=False)
  sequence = outputs["sequence_output"].numpy()
  mean = (sequence * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
  return mean, outputs["pooled_output"].numpy()


BRIGHTMART_FIXTURES = ROOT / "tests" / "fixtures" / "brightmart_zh"


def brightmart_checkpoint_arrays(ln_type="postln"):
  """{name: array} of the checkpoint brightmart's own code wrote (tests/fixtures/brightmart_zh),
  optimizer slots and global_step included."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(str(BRIGHTMART_FIXTURES / ln_type / "albert_model.ckpt"))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="session")
def brightmart_tiny_zh(tmp_path_factory):
  """A directory laid out as brightmart's albert_tiny_zh release (albert_config_tiny.json,
  albert_model.ckpt with Adam slots and global_step, vocab.txt), with albert_zh's real
  21,128-entry vocabulary. Every name and every weight but the extra vocabulary rows comes from
  the checkpoint their code wrote (tests/fixtures/brightmart_zh/postln), at its tiny size."""
  import json  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import reference_albert  # pylint: disable=g-import-not-at-top
  directory = tmp_path_factory.mktemp("albert_tiny_zh")
  config = json.loads((BRIGHTMART_FIXTURES / "postln" / "albert_config.json").read_text())
  vocab = SHARED_DATA / "chinese" / "albert_zh" / "vocab.txt"
  vocab_size = 21128  # the entries of albert_zh's vocab.txt (SPEC: albert_tiny_zh config)
  rng = np.random.default_rng(3)
  arrays = {}
  for name, value in brightmart_checkpoint_arrays("postln").items():
    if name == "global_step" or name.endswith(("/adam_m", "/adam_v")):
      continue
    if name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
      extra = rng.normal(0.0, 0.3, (vocab_size - value.shape[0],) + value.shape[1:])
      value = np.concatenate([value, extra.astype(np.float32)])
    arrays[name] = value
  config["vocab_size"] = vocab_size
  (directory / "albert_config_tiny.json").write_text(json.dumps(config, indent=2))
  reference_albert.write_tf1_checkpoint(str(directory / "albert_model.ckpt"), arrays,
                                        with_optimizer_slots=True)
  shutil.copy(vocab, directory / "vocab.txt")
  return directory


# Tiny raw-text exports (configs/tiny.json, the real SentencePiece model), built once for the
# tests of their packing (test_task_models.py, test_race_serving.py), of their requests
# (test_serving_requests.py) and of their tf.Example and embedding signatures
# (serving_examples.py, serving_http.py, collected there): (model, export_dir, loaded).
SPM_MODEL = SHARED_DATA / "sentencepiece" / "spiece.model"
# pylint: disable=g-import-not-at-top  (TensorFlow is imported by the tests that use them)


def _tiny_config():
  from albert_tf import AlbertConfig
  return AlbertConfig.from_json_file(ROOT / "configs" / "tiny.json")


def _loaded(model, export_dir):
  import tensorflow as tf
  return model, export_dir, tf.saved_model.load(export_dir)


@pytest.fixture(scope="session")
def fill_mask_export(tmp_path_factory):
  """A tiny pretrainer's fill-mask export: 32 tokens, top 3, at most 4 masks."""
  from albert_tf import AlbertPretrainer
  from albert_tf.export.task_models import export_fill_mask
  model = AlbertPretrainer(_tiny_config())
  return _loaded(model, export_fill_mask(
      model, str(tmp_path_factory.mktemp("fm") / "fill_mask"), spm_model_file=str(SPM_MODEL),
      max_seq_length=32, top_k=3, max_masks=4))


@pytest.fixture(scope="session")
def classifier_export(tmp_path_factory):
  """A tiny 2-label classifier's serving export (labels negative, positive; 24 tokens)."""
  from albert_tf.export.task_models import export_classifier
  from albert_tf.modeling.classifier import AlbertClassifier
  model = AlbertClassifier(_tiny_config(), 2)
  return _loaded(model, export_classifier(
      model, str(tmp_path_factory.mktemp("cls") / "serving"), ["negative", "positive"],
      spm_model_file=str(SPM_MODEL), max_seq_length=24))


@pytest.fixture(scope="session")
def race_export(tmp_path_factory):
  """A tiny 4-choice model's RACE export: 64 tokens (tiny.json's positions), 16 qa tokens."""
  from albert_tf.export.race_serving import export_multiple_choice
  from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
  model = AlbertMultipleChoice(_tiny_config()).build_for(4)
  return _loaded(model, export_multiple_choice(
      model, str(tmp_path_factory.mktemp("race") / "export"), spm_model_file=str(SPM_MODEL),
      max_seq_length=64, max_qa_length=16))


@pytest.fixture(scope="session")
def encoder_export(tmp_path_factory):
  """A tiny pretrainer's encoder export (any length up to 64)."""
  from albert_tf import AlbertPretrainer
  from albert_tf.export.encoder import export_encoder
  model = AlbertPretrainer(_tiny_config())
  return _loaded(model, export_encoder(model, str(tmp_path_factory.mktemp("enc") / "export")))


@pytest.fixture(scope="session")
def embed_export(fill_mask_export, tmp_path_factory):
  """The sentence-embedding model of fill_mask_export's pretrainer: 32 tokens."""
  from albert_tf.export.task_models import export_embedding
  model = fill_mask_export[0]
  return _loaded(model, export_embedding(
      model.encoder, str(tmp_path_factory.mktemp("embed") / "export"),
      spm_model_file=str(SPM_MODEL), max_seq_length=32))


@pytest.fixture(scope="session")
def squad_export(tmp_path_factory):
  """A tiny v1 SQuAD export: 48 tokens, stride 16, questions of 12."""
  from albert_tf.export.squad_serving import export_squad
  from albert_tf.modeling.squad import AlbertSquad
  model = AlbertSquad(_tiny_config())
  return _loaded(model, export_squad(
      model, str(tmp_path_factory.mktemp("squad") / "export"), spm_model_file=str(SPM_MODEL),
      max_seq_length=48, doc_stride=16, max_query_length=12))


NER_LABELS = ["O", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]


def _ner_export(folder, use_crf):
  from albert_tf.export.ner_serving import export_ner
  from albert_tf.modeling.token_classifier import AlbertTokenClassifier
  model = AlbertTokenClassifier(_tiny_config(), NER_LABELS, use_crf=use_crf)
  return _loaded(model, export_ner(model, str(folder / "export"), spm_model_file=str(SPM_MODEL),
                                   max_seq_length=16, doc_stride=6))


@pytest.fixture(scope="session")
def ner_export(tmp_path_factory):
  """A tiny NER export (softmax head; ORG and MISC tags): 16 tokens, stride 6."""
  return _ner_export(tmp_path_factory.mktemp("ner"), use_crf=False)


@pytest.fixture(scope="session")
def ner_crf_export(tmp_path_factory):
  """ner_export with a CRF head."""
  return _ner_export(tmp_path_factory.mktemp("ner_crf"), use_crf=True)
# pylint: enable=g-import-not-at-top
