"""The SAO learner: policy and critic updates from finished trajectories.

One `step(trajectories)`: values from the critic (no grad) -> skip-observation GAE per
trajectory (length-adaptive lambda for the policy, lambda = 1 for the critic) -> one
policy update with SAO's double-sided masked loss -> `critic_steps` critic updates
(SAO: K = 2) -> version + 1. Runs in one process; the FSDP2 learner group is the next step
up and keeps this interface.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

from trainer.algorithms import gae, length_adaptive_lambda, sao_policy_loss, value_loss
from trainer.models import ValueModel
from trainer.trajectory import Trajectory


class CheckpointError(RuntimeError):
    """A checkpoint is missing or unreadable; the message names the file."""


def _batch(trajectories: list[Trajectory], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded [B, T] tensors; per-token fields are shifted to align with targets."""
    length = max(len(t) for t in trajectories)
    batch = len(trajectories)
    input_ids = torch.full((batch, length), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, length), dtype=torch.long)
    policy = torch.zeros((batch, length), dtype=torch.bool)
    rollout_logp = torch.zeros((batch, length), dtype=torch.float32)
    for row, traj in enumerate(trajectories):
        n = len(traj)
        input_ids[row, :n] = torch.tensor(traj.token_ids)
        attention[row, :n] = 1
        policy[row, :n] = torch.tensor(traj.policy_mask)
        rollout_logp[row, :n] = torch.tensor(traj.logprobs)
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        # Token t+1 is predicted at position t: everything below is indexed by target.
        "targets": input_ids[:, 1:],
        "policy_mask": policy[:, 1:],
        "rollout_logp": rollout_logp[:, 1:],
    }


def token_logprobs(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """log pi(token t+1 | tokens <= t) for every position, shape [B, T-1]."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    log_probs = torch.log_softmax(logits / temperature, dim=-1)
    return log_probs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


class SAOLearner:
    def __init__(
        self,
        policy: nn.Module,
        critic: ValueModel,
        *,
        pad_id: int,
        lr: float = 1e-6,
        critic_lr: float = 5e-6,
        eps_low: float = 0.8,
        eps_high: float = 3.0,
        critic_steps: int = 2,
        gamma: float = 1.0,
        lambda_alpha: float = 1.5,
        critic_lambda: float = 1.0,
        temperature: float = 1.0,
        max_grad_norm: float = 1.0,
        aggregation: str = "token_mean",
    ) -> None:
        self.policy, self.critic = policy.train(), critic.train()
        self.pad_id = pad_id
        self.eps_low, self.eps_high = eps_low, eps_high
        self.critic_steps = critic_steps
        self.gamma, self.lambda_alpha, self.critic_lambda = gamma, lambda_alpha, critic_lambda
        self.temperature = temperature
        self.max_grad_norm = max_grad_norm
        self.aggregation = aggregation
        self.policy_optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)
        self.critic_optimizer = torch.optim.AdamW(critic.parameters(), lr=critic_lr)
        self.version = 0

    def advantages(
        self, trajectories: list[Trajectory], batch: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy advantages and critic returns, [B, T-1], zero off policy tokens.

        Every episode here ends with a graded submission, so the value after the last
        action is 0 (no bootstrap) whether the agent finished or a limit cut it short.
        """
        with torch.no_grad():
            values = self.critic(batch["input_ids"], batch["attention_mask"])[:, :-1].float()
        advantages = torch.zeros_like(values)
        returns = torch.zeros_like(values)
        for row, traj in enumerate(trajectories):
            positions = batch["policy_mask"][row].nonzero().squeeze(-1)
            if positions.numel() == 0:
                continue
            token_values = values[row, positions]
            rewards = torch.zeros_like(token_values)
            rewards[-1] = traj.reward
            lam = length_adaptive_lambda(positions.numel(), self.lambda_alpha)
            advantages[row, positions], _ = gae(rewards, token_values, self.gamma, lam)
            _, returns[row, positions] = gae(rewards, token_values, self.gamma, self.critic_lambda)
        return advantages, returns

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        if not trajectories:
            raise ValueError("learner step needs at least one trajectory")
        batch = _batch(trajectories, self.pad_id)
        mask = batch["policy_mask"]
        advantages, returns = self.advantages(trajectories, batch)

        logp = token_logprobs(self.policy, batch["input_ids"], batch["attention_mask"], self.temperature)
        loss, stats = sao_policy_loss(
            logp, batch["rollout_logp"], advantages, mask, self.eps_low, self.eps_high, self.aggregation
        )
        self.policy_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.policy_optimizer.step()

        critic_losses = []
        for _ in range(self.critic_steps):
            values = self.critic(batch["input_ids"], batch["attention_mask"])[:, :-1].float()
            critic_loss = value_loss(values, returns, mask, self.aggregation)
            self.critic_optimizer.zero_grad(set_to_none=True)
            critic_loss.backward()
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.max_grad_norm)
            self.critic_optimizer.step()
            critic_losses.append(critic_loss.item())

        self.version += 1
        n = mask.sum().clamp(min=1)
        return {
            "policy_loss": loss.item(),
            "value_loss": critic_losses[-1] if critic_losses else 0.0,
            "grad_norm": float(grad_norm),
            "masked_low_fraction": stats.masked_low_fraction,
            "masked_high_fraction": stats.masked_high_fraction,
            "mean_ratio": stats.mean_ratio,
            "advantage_mean": float((advantages * mask).sum() / n),
            "policy_tokens": int(mask.sum()),
            "version": self.version,
        }

    def engine_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.policy.state_dict().items()}

    # -- checkpoints ----------------------------------------------------------------------
    def save(self, directory: str | Path, extra: dict | None = None, tokenizer=None) -> Path:
        """Write a checkpoint atomically: a complete folder appears, or nothing does.

        The policy is saved as a Hugging Face folder (safetensors) that transformers loads
        directly; critic and optimizers as torch state dicts; counters as JSON.
        """
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
        try:
            self.policy.save_pretrained(staging / "policy", safe_serialization=True)
            if tokenizer is not None:
                tokenizer.save_pretrained(staging / "policy")
            torch.save(self.critic.state_dict(), staging / "critic.pt")
            torch.save(
                {"policy": self.policy_optimizer.state_dict(), "critic": self.critic_optimizer.state_dict()},
                staging / "optimizers.pt",
            )
            (staging / "state.json").write_text(json.dumps({"version": self.version, **(extra or {})}, indent=2))
            if directory.exists():
                shutil.rmtree(directory)
            os.replace(staging, directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return directory

    def load(self, directory: str | Path) -> dict:
        """Restore weights, optimizers and counters from `save`; returns the saved state."""
        from safetensors.torch import load_file

        directory = Path(directory)
        try:
            state = json.loads((directory / "state.json").read_text())
            weights = load_file(str(directory / "policy" / "model.safetensors"))
            missing, unexpected = self.policy.load_state_dict(weights, strict=False)
            if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:
                raise CheckpointError(f"{directory / 'policy'}: weights do not match the model")
            self.critic.load_state_dict(torch.load(directory / "critic.pt", weights_only=True))
            optimizers = torch.load(directory / "optimizers.pt", weights_only=True)
            self.policy_optimizer.load_state_dict(optimizers["policy"])
            self.critic_optimizer.load_state_dict(optimizers["critic"])
        except CheckpointError:
            raise
        except Exception as exc:  # a torn or foreign checkpoint: say which one
            raise CheckpointError(f"checkpoint {directory} is unreadable: {type(exc).__name__}: {exc}") from exc
        self.version = int(state["version"])
        return state
