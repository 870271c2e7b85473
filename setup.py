"""Packages albert_tf for Apache Beam's remote workers (Dataflow's `--setup_file=./setup.py`).

Not needed to use the project here: the README's set-up installs requirements.txt into a venv
and runs the scripts from this folder. The workers of create_pretraining_data's Beam pipeline
need only the data path: albert_tf itself, the tokenizers, jieba for Chinese word masking, and
TensorFlow for reading and writing `gs://` paths (tf.io.gfile).
"""

import setuptools

setuptools.setup(
    name="albert-tf",
    version="0.1.0",
    description="ALBERT on TensorFlow 2: the pretraining-data pipeline's worker package",
    packages=setuptools.find_packages(include=["albert_tf", "albert_tf.*"]),
    python_requires=">=3.10",
    install_requires=["tensorflow~=2.20.0", "sentencepiece", "absl-py", "numpy",
                      "jieba==0.42.1"],
)
