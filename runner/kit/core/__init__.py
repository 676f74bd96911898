"""Shared ground: errors (and the exit codes), paths, units, schema checks, process
helpers, the benchmarks' declarations (benches), what --json prints (jsonout), a user's
command as the benchmark (command) and how a trial's result is read (readers). Imports
nothing else of kit."""
