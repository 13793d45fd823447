"""Benchmarks. `bench.perf`: quick ratio benchmarks (`python -m bench.perf.NAME`, minutes).
`bench.experiments`: long training comparisons (`python -m bench.experiments.NAME`, up to
hours). Both write their figures to `bench/results/NAME.json` by default (`common.RESULTS`,
ignored by git); records of long runs kept in the repository are in `docs/results/`."""
