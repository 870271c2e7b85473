"""Scores: GLUE's (`glue`), NER's entity-level F1 as conlleval counts it (`ner`), SQuAD's
official EM / F1 (`squad`) and CMRC 2018's (`cmrc2018`)."""
