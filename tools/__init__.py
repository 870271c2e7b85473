"""Developer tools that are not part of the library: `python -m tools.mutation`."""
