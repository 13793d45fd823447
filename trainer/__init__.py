"""How the policy learns: algorithms, engines, rollout, learner and the training entry point."""
