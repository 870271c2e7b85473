"""ALBERT's tokenization: text -> pieces -> ids, and training the SentencePiece model.

  from albert_tf import tokenization
  tok = tokenization.FullTokenizer(spm_model_file="spiece.model")
  tokenization.encode_pair(tok, "a premise", "a hypothesis", max_seq_length=16)

`tokenizer` holds the tokenizer itself (SentencePiece and WordPiece modes, `preprocess_text`,
pair packing); its public names are re-exported here, so `albert_tf.tokenization.X` keeps
working as when this was one module. `train_spm` trains a SentencePiece model with the
original's recipe (on the command line: `python -m albert_tf.cli.train_spm --help`). See
SPEC.md, "Tokenization".
"""

from albert_tf.tokenization.tokenizer import (PAD_ID, SPIECE_UNDERLINE, FullTokenizer, encode_pair,
                                              encode_pieces, load_vocab, preprocess_text,
                                              truncate_seq_pair)

__all__ = [
    "FullTokenizer",
    "PAD_ID",
    "SPIECE_UNDERLINE",
    "encode_pair",
    "encode_pieces",
    "load_vocab",
    "preprocess_text",
    "truncate_seq_pair",
]
