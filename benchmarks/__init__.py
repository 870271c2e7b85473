"""Speed and memory harness (not part of the test run): `python -m benchmarks.run`."""
