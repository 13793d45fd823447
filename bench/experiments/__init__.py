"""Training experiments, tens of minutes to hours each: `python -m bench.experiments.NAME`
trains its runs into `--out` (resumable), prints a table and writes its figures to `--json`
(default `bench/results/NAME.json`). What they share is in `common`; they never import each
other. Records of runs kept in this repository are in `docs/results/`."""
