"""Shared ground: errors, paths, units, schema checks, process helpers, and the
benchmarks' declarations (benches). Imports nothing else of kit."""
