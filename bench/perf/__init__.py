"""Quick benchmarks, minutes each: `python -m bench.perf.NAME [--json PATH]` prints a table and
writes one flat JSON object (default `bench/results/NAME.json`). Every compared figure is a
ratio against a baseline measured in the same run, side by side: these machines are shared and
noisy."""
