"""Serves exported models on TF Serving's REST API (TF Serving's flags), where TF Serving is not
installed: see albert_tf/cli/serve.py and docs/serving.md.

  python serve.py --model_name=sst2 --model_base_path=models/sst2 --rest_api_port=8501
"""

import sys

from albert_tf.cli import serve

if __name__ == "__main__":
  sys.exit(serve.main())
