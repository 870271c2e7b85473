"""python -m benchmarks.ablations --study sentence_task|sharing|embedding_size [--toy]"""

import sys

from benchmarks.ablations.study import main

if __name__ == "__main__":
  sys.exit(main())
