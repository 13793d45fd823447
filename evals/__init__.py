"""How well it does: SWE-bench-style evaluation runs, grading and reports."""
