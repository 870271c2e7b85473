"""Data: pretraining instances (SOP pairs, n-gram masks) and their TFRecords."""
