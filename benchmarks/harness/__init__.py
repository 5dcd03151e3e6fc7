"""The side-by-side benchmark harness behind ``benchmarks/run`` (see benchmarks/README.md)."""
