"""Cached fine-tuning features: a TFRecord reused only while what it was built from is unchanged.

The original names a cache by task and length alone, so other data or another vocabulary would
silently reuse it. Here each cache `<path>` has a sidecar `<path>.json` holding a key, the
SHA-256 of everything the features depend on (`cache_key`): a cache whose key differs is
rebuilt. The sidecar is written after the records (both atomically), so a build stopped
half-way never passes for a complete one.
"""

import hashlib
import json
import logging

from albert_tf import files

logger = logging.getLogger(__name__)


def cache_key(sources=(), settings=(), rows=()):
  """SHA-256 (hex) of the bytes of the files `sources` (the input, the vocabulary), the
  JSON of `settings` (flags that change the features) and of each of `rows` (examples as
  JSON-able lists, for data read from several files)."""
  digest = hashlib.sha256()
  for path in sources:
    with files.open_file(path, "rb") as f:
      for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
  digest.update(json.dumps(list(settings)).encode())
  for row in rows:
    digest.update(json.dumps(row).encode())
  return digest.hexdigest()


def reuse_or_build(path, key, build):
  """The facts (a dict) of the cache `path`: read from its sidecar when that holds `key`, else
  from `build()`, which writes `path` and returns them (a record count is taken as
  {"examples": count}); the sidecar is written after it."""
  sidecar = path + ".json"
  if files.exists(path) and files.exists(sidecar):
    with files.open_file(sidecar) as f:
      saved = json.load(f)
    if saved.get("key") == key:
      facts = {k: v for k, v in saved.items() if k != "key"}
      logger.info("Using the cached features %s (%s)", path,
                  ", ".join(f"{k} {v}" for k, v in facts.items() if isinstance(v, int)))
      return facts
    logger.info("%s was built from other data, vocabulary or flags; rebuilding it", path)
  if files.exists(sidecar):  # a rebuild stopped half-way must not pass for the old one
    files.remove(sidecar)
  facts = build()
  if not isinstance(facts, dict):
    facts = {"examples": facts}
  files.write_json(sidecar, dict(key=key, **facts), indent=None)
  logger.info("Wrote the features to %s (%s)", path,
              ", ".join(f"{k} {v}" for k, v in facts.items() if isinstance(v, int)))
  return facts
