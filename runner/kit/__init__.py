"""kit: build, convert and run distributed deep-learning benchmarks in containers."""

__version__ = "0.1.0"
