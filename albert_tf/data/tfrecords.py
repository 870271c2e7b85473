"""TFRecord files: protobuf wire-format encoding, CRC-32C framing, files that appear only whole.

Encoding and framing do not import TensorFlow: a `tf.train.Example` is encoded straight to
protobuf wire format and framed as TFRecords with a vectorised CRC-32C, so the workers of the
pretraining-data job start in milliseconds and the writer costs a few microseconds per record.
`AtomicShardWriter` (sharded pretraining data) and `write_tfrecord_atomically` (one file of the
fine-tuning readers: classification, SQuAD, RACE) write under `files.temporary_name`s and
rename when complete, so a truncated file never stands under its final name.
"""

import os
import struct

import numpy as np

from albert_tf import files


# --- protobuf wire format ---------------------------------------------------------------------
def _varint(value):
  out = bytearray()
  while value > 0x7F:
    out.append((value & 0x7F) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


_VARINT_CACHE = [_varint(i) for i in range(1 << 16)]


def _varint_fast(value):
  return _VARINT_CACHE[value] if value < 65536 else _varint(value)


def _field(tag, payload):
  return tag + _varint_fast(len(payload)) + payload


def int64_feature(values):
  """Feature.int64_list{value: packed varints}, as bytes; values are non-negative."""
  try:
    packed = bytes(values)  # every value < 128 (masks, segments, short positions)
    if max(values, default=0) >= 128:
      raise ValueError
  except ValueError:
    cache = _VARINT_CACHE
    try:
      packed = b"".join([cache[v] for v in values])
    except (IndexError, TypeError):
      if min(values) < 0:
        raise ValueError("int64 features are written as varints of non-negative "
                         "values") from None
      packed = b"".join([_varint(v) for v in values])
  return _field(b"\x1a", _field(b"\x0a", packed))


def float_feature(values):
  """Feature.float_list{value: packed}, as bytes."""
  packed = struct.pack(f"<{len(values)}f", *values)
  return _field(b"\x12", _field(b"\x0a", packed))


def feature_key(name):
  """The encoded key of feature `name`; a writer of many records computes it once."""
  return _field(b"\x0a", name.encode())


def encode_example(features):
  """A `tf.train.Example` as bytes, from `(key, feature)` pairs: keys of `feature_key`,
  features of `int64_feature` / `float_feature`."""
  entries = [_field(b"\x0a", key + _field(b"\x12", feature)) for key, feature in features]
  return _field(b"\x0a", b"".join(entries))  # Example.features{feature: entries}


# --- TFRecord framing ---------------------------------------------------------------------------
def _crc32c_tables():
  """Byte-at-a-time and two-bytes-at-a-time tables of reflected CRC-32C (poly 0x82F63B78)."""
  table = np.zeros(256, np.uint32)
  for i in range(256):
    crc = i
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    table[i] = crc
  # Two 8-bit steps on a 16-bit value x: T16[x] = T[T[x & 255] ^ (x >> 8) & 255] ^ (T[x & 255] >> 8)
  x = np.arange(65536, dtype=np.uint32)
  first = table[x & 0xFF] ^ (x >> 8)
  table16 = table[first & 0xFF] ^ (first >> 8)
  return table, table16


_CRC_TABLE, _CRC_TABLE16 = _crc32c_tables()


def crc32c_batch(records):
  """CRC-32C (Castagnoli) of each bytes object, vectorised across records with NumPy."""
  if not records:
    return np.zeros(0, np.uint32)
  n = len(records)
  lengths = np.fromiter((len(r) for r in records), np.int64, n)
  order = np.argsort(-lengths, kind="stable")
  sorted_lengths = lengths[order]
  max_len = int(sorted_lengths[0]) + 1  # room to read a 16-bit word past an odd end
  rows = np.zeros((n, max_len + (max_len & 1)), np.uint8)
  for row, i in enumerate(order):
    record = records[i]
    rows[row, :len(record)] = np.frombuffer(record, np.uint8)
  # Word j (bytes 2j, 2j+1) of every record, as one contiguous row.
  words = np.ascontiguousarray(rows.view("<u2").T)
  # Records are sorted longest first, so those with a whole word left are a prefix.
  pairs = sorted_lengths // 2
  crc = np.full(n, 0xFFFFFFFF, np.uint32)
  table16 = _CRC_TABLE16
  active = np.searchsorted(-pairs, -np.arange(1, int(pairs[0]) + 1), side="right")
  for j, k in enumerate(active):
    c = crc[:k]
    crc[:k] = table16[(c ^ words[j, :k]) & 0xFFFF] ^ (c >> 16)
  odd = np.flatnonzero(sorted_lengths & 1)
  if odd.size:
    last = rows[odd, sorted_lengths[odd] - 1]
    c = crc[odd]
    crc[odd] = _CRC_TABLE[(c ^ last) & 0xFF] ^ (c >> 8)
  crc ^= np.uint32(0xFFFFFFFF)
  out = np.empty_like(crc)
  out[order] = crc
  return out


def _masked(crc):
  crc = crc.astype(np.uint64)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_records(records):
  """TFRecord framing of serialized records: length, masked CRC of length, data, masked CRC."""
  headers = [struct.pack("<Q", len(r)) for r in records]
  header_crcs = _masked(crc32c_batch(headers))
  data_crcs = _masked(crc32c_batch(records))
  parts = []
  for header, hcrc, record, dcrc in zip(headers, header_crcs, records, data_crcs):
    parts += [header, struct.pack("<I", int(hcrc)), record, struct.pack("<I", int(dcrc))]
  return b"".join(parts)


# --- Files that appear only whole ---------------------------------------------------------------
class AtomicShardWriter:
  """Writes TFRecord shards under temporary names; `commit()` renames them into place.

  A crash (or `abort()`) leaves no file under a final shard name, so a truncated shard can
  never pass for a complete one.
  """

  def __init__(self, output_files):
    self.output_files = list(output_files)
    for path in self.output_files:
      folder = os.path.dirname(os.path.abspath(path))
      if not os.path.isdir(folder):
        raise FileNotFoundError(f"output folder does not exist: {folder} (for {path})")
    self.temp_files = [files.temporary_name(p) for p in self.output_files]
    self._handles = [open(t, "wb") for t in self.temp_files]
    self.counts = [0] * len(self.output_files)
    self._next = 0

  def write(self, records, first_shard=None):
    """Appends serialized examples round-robin across shards (as the original), from
    `first_shard` when given, else from where the previous call stopped."""
    n = len(self._handles)
    if first_shard is not None:
      self._next = first_shard % n
    groups = [[] for _ in range(n)]
    for record in records:
      groups[self._next].append(record)
      self._next = (self._next + 1) % n
    for shard, group in enumerate(groups):
      if group:
        self._handles[shard].write(frame_records(group))
        self.counts[shard] += len(group)

  def commit(self):
    for handle in self._handles:
      handle.flush()
      os.fsync(handle.fileno())
      handle.close()
    for temp, final in zip(self.temp_files, self.output_files):
      files.rename(temp, final)

  def abort(self):
    for handle, temp in zip(self._handles, self.temp_files):
      handle.close()
      if os.path.exists(temp):
        os.remove(temp)


def write_tfrecord_atomically(path, records):
  """Writes serialized records (bytes) to `path` under a temporary name, renamed when complete:
  the file appears only whole, and a failure removes the temporary. Returns the count."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  count = 0
  with files.atomic_path(path) as temp:
    with tf.io.TFRecordWriter(temp) as writer:
      for record in records:
        writer.write(record)
        count += 1
  return count
