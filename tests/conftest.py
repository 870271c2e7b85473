"""Shared pytest set-up: import paths, quiet TensorFlow, real-data locations."""

import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

ROOT = pathlib.Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests"):
  if str(path) not in sys.path:
    sys.path.insert(0, str(path))

SHARED_DATA = ROOT.parent / "shared" / "data"

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def shared_data():
  """../shared/data: real corpora, GLUE, SentencePiece models (read-only)."""
  if not SHARED_DATA.is_dir():
    raise FileNotFoundError(f"real test data not found at {SHARED_DATA} (see DEVELOPERS.md)")
  return SHARED_DATA


def float32_atol(reference, terms, ulps=4):
  """An absolute tolerance for float32 results that two graphs or kernel libraries (Eigen,
  oneDNN, any thread count) may sum in other orders: `ulps` units in the last place of the
  largest magnitude in `reference`, times `terms`, the length of the longest chain of
  additions behind each value (each may round by up to half an ulp of the running sum)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  return ulps * float(np.spacing(np.float32(np.max(np.abs(reference))))) * terms
