"""create_pretraining_data as an Apache Beam pipeline: the same shards, made by a cluster.

    create_pretraining_data(input_files, output_files, options,
                            beam_pipeline_options="--runner=DirectRunner --direct_num_workers=2 "
                                                  "--direct_running_mode=multi_processing")

The local path (create.py) streams blocks through one machine's cores; this pipeline gives the
same work to Beam, so it runs on the DirectRunner here and on Dataflow, Flink or Spark as they
are:

    input files -> Reshuffle -> read each file's blocks -> Reshuffle (blocks, not records)
      -> process_block (tokenize, instances, masks, records) -> (shard, record)
      -> GroupByKey(shard) -> each shard written under a temporary name -> commit

Same records: a block is the local path's block (blocks never span two files), seeded by its
key (file index, block number), and its records go to the shards from `shard_offset(key)` on,
round-robin, as the local path writes them. So each shard holds the local shard's records; the
order inside a shard may differ, because Beam gives a shard's records to its writer in no set
order and sorting them would hold a whole shard in one worker's memory (pretraining reads the
shards through a shuffle buffer anyway).

Scale: a worker holds one file's reader and a block or two at a time; the only shuffles are the
blocks' text (to spread one large file over many workers) and the records into their shards
(what writing shards needs). Each shard is written to `<shard>.tmp-<8 hex>` and every one is
renamed to its final name only in the last step, after all were written, with the metadata JSON
last; a failed or stopped job leaves no file under a final name, and removes its temporary ones
(a rerun of either path removes those of a job killed outright).

Faults, as the local path: the options (`pipeline_options`), inputs, vocabulary and output
folders are checked in this process before the pipeline starts (`create.check_job`), so a job
that cannot finish fails in one line, not in its workers. SIGTERM or SIGINT ends the
DirectRunner's worker processes (a remote runner's job is cancelled), removes the temporary
files and raises `create.Interrupted`, which the script turns into exit status 143 / 130.

Paths may be on any TensorFlow file system (`gs://...`): files are read and written through
`tf.io.gfile` when they have a scheme.

Progress: Beam's counters (`albert_tf` namespace: files, blocks, documents, instances, bytes)
show in the runner's UI (Dataflow's job page); each worker logs each block it finishes.
"""

import argparse
import collections
import json
import logging
import shlex
import signal
import threading
import time
import typing

from albert_tf import files
from albert_tf.data import tfrecords
from albert_tf.data.pretraining import create
from albert_tf.jobs import signals

logger = logging.getLogger(__name__)
NAMESPACE = "albert_tf"


def _beam():
  try:
    import apache_beam as beam  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ValueError(f"--beam_pipeline_options needs apache-beam ({e}); "
                     "pip install -r requirements.txt") from e
  return beam


def _merge_reports(reports):
  """One ReadReport from the per-file ones (empty files in input order)."""
  merged = create.ReadReport()
  for _, report in sorted(reports, key=lambda item: item[0]):
    merged.merge(report)
  return merged


def _sum_counters(counters):
  total = collections.Counter()
  for counter in counters:
    total.update(counter)
  return dict(total)


def _build(pipeline, input_files, output_files, options, metadata_file, segmentation, runner,
           started):
  """The pipeline's transforms, from the input list to the committed shards."""
  beam = _beam()
  metrics = beam.metrics.Metrics
  num_shards = len(output_files)

  @beam.typehints.with_output_types(typing.Tuple[typing.Any, typing.Any])
  class ReadBlocks(beam.DoFn):
    """(file index, path) -> (block key, block, notes) of the file; the file's read report as
    the "report" output."""

    def process(self, item):
      index, path = item
      report = create.ReadReport()
      blocks = 0
      for key, block, notes in create.iter_file_blocks(index, path, options, report):
        blocks += 1
        yield key, (block, notes)
      metrics.counter(NAMESPACE, "files").inc()
      metrics.counter(NAMESPACE, "blocks").inc(blocks)
      metrics.counter(NAMESPACE, "bytes").inc(report.bytes_read)
      yield beam.pvalue.TaggedOutput("report", (index, report))

  # Main outputs' types: Beam would infer a union with the tagged side outputs.
  @beam.typehints.with_output_types(typing.Tuple[int, bytes])
  class ProcessBlock(beam.DoFn):
    """(block key, block) -> (shard, record) for each record; statistics as "stats"."""

    def setup(self):
      create.init_worker(options)

    def process(self, item):
      key, (block, notes) = item
      serialized, stats, long_lines = create.process_block(key, block, notes)
      for long_line in long_lines:
        create.log_long_line(long_line, options.dupe_factor)
      first = create.shard_offset(options.random_seed, key, num_shards)
      for k, record in enumerate(serialized):
        yield (first + k) % num_shards, record
      metrics.counter(NAMESPACE, "documents").inc(stats.get("documents", 0))
      metrics.counter(NAMESPACE, "instances").inc(stats.get("instances", 0))
      logger.info("block %s of %s: %d instances", key, input_files[key[0]],
                  stats.get("instances", 0))
      yield beam.pvalue.TaggedOutput("stats", stats)

  class WriteShard(beam.DoFn):
    """(shard, records) -> (shard, temporary file, count): the shard's records framed as
    TFRecords under a temporary name of its own (a retried attempt writes another)."""

    def process(self, item):
      shard, shard_records = item
      temp = files.temporary_name(output_files[shard])
      count, batch = 0, []
      with files.open_file(temp, "wb") as f:
        for record in shard_records:
          batch.append(record)
          if len(batch) >= 1024:
            f.write(tfrecords.frame_records(batch))
            count += len(batch)
            batch = []
        if batch:
          f.write(tfrecords.frame_records(batch))
          count += len(batch)
      yield shard, temp, count

  def commit(written, stats, reports):
    """Renames every shard into place (an empty file for a shard that got no record), removes
    the other temporary files, writes the metadata last; or, with no instance at all, removes
    the temporary files and fails."""
    temps = {shard: (temp, count) for shard, temp, count in written}
    totals = collections.Counter(stats)
    if totals["instances"] == 0:
      for output in output_files:
        for path in files.temporary_siblings(output):
          files.remove(path)
      raise create.no_instances_error(input_files)
    counts = []
    for shard, output in enumerate(output_files):
      if shard in temps:
        temp, count = temps[shard]
      else:
        temp, count = files.temporary_name(output), 0
        with files.open_file(temp, "wb"):
          pass
      files.rename(temp, output)
      counts.append(count)
      for path in files.temporary_siblings(output):  # failed attempts' copies
        files.remove(path)
    report = _merge_reports(reports)
    elapsed = time.time() - started
    metadata = create.build_metadata(options, input_files, output_files, counts, totals, report,
                                     elapsed)
    metadata["runner"] = runner
    metadata["word_segmentation"] = segmentation
    create.write_metadata(metadata_file, metadata)
    create.log_summary(options, totals, output_files, elapsed, metadata_file, report.bad_lines)
    return metadata_file

  read = (pipeline
          | "Files" >> beam.Create(list(enumerate(input_files)))
          | "SpreadFiles" >> beam.Reshuffle()
          | "ReadBlocks" >> beam.ParDo(ReadBlocks()).with_outputs("report", main="blocks"))
  made = (read.blocks
          | "SpreadBlocks" >> beam.Reshuffle()
          | "ProcessBlocks" >> beam.ParDo(ProcessBlock()).with_outputs("stats", main="records"))
  written = (made.records
             | "GroupByShard" >> beam.GroupByKey()
             | "WriteShards" >> beam.ParDo(WriteShard()))
  stats = made.stats | "SumStatistics" >> beam.CombineGlobally(_sum_counters)
  reports = read.report | "Reports" >> beam.combiners.ToList()
  return (written
          | "AllShards" >> beam.combiners.ToList()
          | "Commit" >> beam.Map(commit, beam.pvalue.AsSingleton(stats),
                                 beam.pvalue.AsSingleton(reports)))


# Beam's own chatter about its workers, for a job run from the command line: warnings, and our
# progress lines (one per block).
QUIET_WORKERS = ["--default_sdk_harness_log_level=WARNING",
                 '--sdk_harness_log_level_overrides={"albert_tf": "INFO"}']


def pipeline_options(beam_pipeline_options, extra_args=()):
  """(PipelineOptions, runner) from the flag's string, then `extra_args` (ours); or a ValueError
  naming --beam_pipeline_options and what is wrong: a string shlex cannot split (an unbalanced
  quote), a runner Beam does not know, an option that no Beam options class of that runner
  defines, a value its option refuses. Beam itself would warn and drop an unknown option (a
  typo then runs with the default) and exit the process on a bad value.

    options, runner = pipeline_options("--runner=DirectRunner --direct_num_workers=2")
  """
  from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel
  from apache_beam.runners import runner as beam_runners  # pylint: disable=import-outside-toplevel
  text = beam_pipeline_options or ""

  def fail(why):
    raise ValueError(f"--beam_pipeline_options={text!r}: {why}")

  try:
    args = shlex.split(text)
  except ValueError as e:
    fail(f"cannot split it into options ({e})")
  runner_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
  runner_parser.add_argument("--runner", default="DirectRunner")
  runner_parser.error = fail  # argparse would print its usage and exit
  runner_name = runner_parser.parse_known_args(args)[0].runner
  try:
    # Imports the runner's module, which defines its options (--flink_master, ...).
    runner = beam_runners.create_runner(runner_name)
  except (ValueError, ImportError) as e:
    fail(files.cause(e))

  def refuse_unknown(parser):
    # Beam's parser, with every options class it knows now: parse before it drops the unknown.
    parser.error = fail
    unknown = parser.parse_known_args(args)[1]
    if unknown:
      fail(f"{' '.join(unknown)} is no option of Apache Beam's {runner_name} (a typo?)")

  PipelineOptions(args).get_all_options(add_extra_args_fn=refuse_unknown)
  return PipelineOptions(args + list(extra_args)), runner


def _cancel(result):
  """Cancels a remote runner's job; the DirectRunner's ended with its workers."""
  try:
    result.cancel()
  except Exception:  # pylint: disable=broad-except  (best effort while stopping)
    pass


class _Stop:
  """What SIGTERM or SIGINT does first, before the error unwinds the job: the worker processes
  that the job started end (they would write on, and print their lost connections'
  tracebacks), and Beam, whose workers are gone, keeps quiet in this process (its logs and its
  threads' errors) until `restore`. Remembers the signal: Beam may wrap the error it raises."""

  def __init__(self):
    self.signal_number = None
    self._spared = set(signals.descendants())  # not the job's: there before it
    self._excepthook = threading.excepthook
    self._beam_logger = logging.getLogger("apache_beam")
    self._level = self._beam_logger.level

  def __call__(self, signal_number):
    self.signal_number = signal_number
    self._beam_logger.setLevel(logging.CRITICAL + 1)
    threading.excepthook = lambda args: None
    signals.stop_descendants(spared=self._spared)

  def restore(self):
    threading.excepthook = self._excepthook
    self._beam_logger.setLevel(self._level)


def _remove_temporaries(output_files, metadata_file):
  """Removes this job's temporary shards and metadata (the start removed older ones)."""
  temporaries = [t for path in output_files + [metadata_file]
                 for t in files.temporary_siblings(path)]
  for path in temporaries:
    files.remove_quietly(path)
  return temporaries


def create_pretraining_data(input_files, output_files, options, beam_pipeline_options,
                            metadata_file=None, quiet_workers=False):
  """Runs the job as a Beam pipeline with `beam_pipeline_options` (Beam's own flags, one
  string, e.g. "--runner=DataflowRunner --project=... --region=... --temp_location=gs://...");
  returns the metadata dict written beside the shards, as the local path does.

  Everything the local path checks is checked first, in this process, and so are the options
  (`pipeline_options`). SIGTERM or SIGINT stops the job as the local path does: the
  DirectRunner's worker processes end (a remote runner's job is cancelled), the temporary
  shards and metadata are removed, and `create.Interrupted` is raised. `quiet_workers` keeps
  the workers' logs to warnings and our progress (unless the options set their log level).
  """
  beam = _beam()
  output_files = [str(p) for p in output_files]
  metadata_file = metadata_file or create.metadata_path(output_files)
  quiet = quiet_workers and "sdk_harness_log_level" not in (beam_pipeline_options or "")
  pipeline_args, runner = pipeline_options(beam_pipeline_options, QUIET_WORKERS if quiet else ())
  segmentation = create.check_job(input_files, output_files, options, metadata_file)
  create.remove_leftovers(output_files, metadata_file)
  description = beam_pipeline_options or ""
  started = time.time()
  logger.info("Beam pipeline (%s): %d input files -> %d shards", description or "DirectRunner",
              len(input_files), len(output_files))
  pipeline = beam.Pipeline(runner=runner, options=pipeline_args)
  stop = _Stop()
  # The clean-up below stays inside: a second SIGTERM or Ctrl-C does not cut it short.
  with signals.raising_on_stop(create.Interrupted, first=stop):
    try:
      with pipeline:  # runs it when the block ends
        _build(pipeline, list(input_files), output_files, options, metadata_file,
               segmentation, description, started)
    except BaseException as e:
      signal_number = stop.signal_number or (signal.SIGINT if isinstance(e, KeyboardInterrupt)
                                             else None)
      if signal_number and getattr(pipeline, "result", None) is not None:
        _cancel(pipeline.result)
      removed = _remove_temporaries(output_files, metadata_file)
      if not signal_number:
        raise
      interrupted = create.Interrupted(signal_number)
      logger.warning("%s: the workers are stopped and the temporary shards removed (%d); "
                     "nothing was written under the output names", interrupted, len(removed))
      raise interrupted from None  # what Beam made of it (in_memory, a RuntimeError) is noise
    finally:
      stop.restore()
  with files.open_file(metadata_file, "rb") as f:
    return json.loads(f.read().decode("utf-8"))
