"""The inference layer: what it takes to play episodes with a model, and nothing of training.

- `engines/`: the `Engine` seam (token ids in; ids, logprobs and versions out) and its
  backends (`hf`, `vllm`, `openai`, `scripted`), with `EngineError` for infrastructure
  failures of any backend;
- `rollout/`: chat formatting and the turn loop, linear episodes and PATR trees;
- `trajectory.py`: an episode as the learner sees it, token by token;
- `models.py`: policy, critic and tokenizer loading (and the shipped `tiny` model, `assets/`).

Training (`trainer.learner`, `trainer.orchestrator`, `trainer.recipes`) and evaluation
(`evals`) both stand on this layer. `evals` may import this sub-package and nothing else of
`trainer`, and importing it pulls in no learner, Ray or FSDP (`tests/test_layering.py`).
"""
