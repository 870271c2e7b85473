#!/usr/bin/env bash
# A/B of run_pretraining.py's loop: a git revision (before) against the working tree (after),
# same venv, same data, alternating, 3 repeats; prints examples/s of every loop (the first
# includes tracing) from each run's TensorBoard summaries.
#
#   bash benchmarks/loop_ab.sh <before-rev> <albert_config.json> <train.tfrecord> [steps]
# The data: create_pretraining_data.py --max_seq_length=128 --max_predictions_per_seq=20.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$1 config=$(realpath "$2") data=$(realpath "$3") steps=${4:-60}
work=$(mktemp -d)
git worktree add -f --detach "$work/before" "$rev" >/dev/null
trap 'git worktree remove --force "$work/before"; rm -rf "$work"' EXIT
python=$PWD/.venv/bin/python
for rep in 1 2 3; do
  for side in before after; do
    root=$PWD; [ "$side" = before ] && root=$work/before
    out=$work/run-$side-$rep
    (cd "$root" && "$python" run_pretraining.py --albert_config_file="$config" \
      --input_file="$data" --output_dir="$out" --do_train --train_batch_size=8 \
      --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps="$steps" \
      --num_warmup_steps=5 --save_checkpoints_steps=100000 --iterations_per_loop=10 \
      --log_every_seconds=0 --seed=1 >"$out.log" 2>&1)
    "$python" - "$out" "$side" <<'PY'
import glob, sys
import tensorflow as tf
values = []
for path in glob.glob(sys.argv[1] + "/train/events*"):
  for event in tf.compat.v1.train.summary_iterator(path):
    for v in event.summary.value:
      if v.tag == "examples_per_second":
        values.append((event.step, float(tf.make_ndarray(v.tensor))))
print(sys.argv[2], "examples/s per loop:", [round(x, 2) for _, x in sorted(values)])
PY
  done
done
