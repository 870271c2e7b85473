"""Text -> SOP instances with n-gram masks -> sharded TFRecords (local pool and Apache Beam
share the block functions), dynamic masking, and the records' statistics."""
