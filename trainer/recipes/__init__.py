"""Training recipes: one class per way of training, whose methods are the phases of a run
(`setup`, `warm_start`, `evaluate`, `run`, `save`, `close`), in torchtune's shape.

- `rl.RLRecipe`: RL with rollout workers and a learner group on Ray, asynchronous or
  synchronous (`orchestrator.mode`; `make train-swe`; SAO by default, any algorithm of
  `trainer.algorithms.registry`).

A new recipe (e.g. an online setting whose task stream shifts) is a new module here that
reuses `trainer.build`, the orchestrator and the learner group; `trainer/train.py` stays
the entry point that reads the config and calls the phases.
"""
