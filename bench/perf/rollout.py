"""Rollout throughput of the hf engine: episodes batched across a worker's slots, one at a
time, and plain `generate`, at equal outputs.

The same episodes for every method: `EPISODES` multi-turn episodes of the built-in tasks
(their real prompts: system text, tool schemas, issue; about 1,200 tokens), `TURNS` turns of
`MAX_NEW_TOKENS` greedy tokens each (temperature 0, no stop token, so every method decodes
the same number of tokens), each turn's prompt the episode so far plus a fixed observation.
The untrained tiny model on CPU.

- `generate`: Hugging Face's `model.generate`, one episode's turn at a time, each turn from
  scratch (the baseline a plain loop gets);
- `one_at_a_time`: `HFEngine`, one turn at a time (how a worker's slots used to share it,
  under a lock), reusing each episode's cached prefix;
- `slots`: a worker's `TurnBatcher` with one thread per episode (`rollout.batch_turns`):
  continuous batching, each turn joins the running decode at its next step, from its
  cached prefix and with its own seed, and leaves it when done;
- `lockstep`: every episode's turn t in one `HFEngine.generate` call (the batcher's best case).

Figures: generated tokens per second of each, speedups against `one_at_a_time` and
`generate` (ratios measured in the same run), the mean rows per decode step the slots
reached, and
whether every method produced token-identical episodes (it must: temperature 0). Each
method runs `REPEATS` times, interleaved; the median time counts.
"""

from __future__ import annotations

import statistics
import threading
import time

import torch

from bench.common import arguments, report

EPISODES = 8
TURNS = 3
MAX_NEW_TOKENS = 32
OBSERVATION = "exit code 0\nOK"
REPEATS = 5
"""Runs of each method, interleaved (load on the machine hits all alike); the median counts."""


def episode_prompts(chat) -> list[list[int]]:
    """The first prompt of `EPISODES` episodes, the built-in tasks in turn."""
    from agent_env import ToolEnv
    from tasks import builtin_tasks

    tasks = builtin_tasks()
    prompts = []
    for index in range(EPISODES):
        with ToolEnv(tasks[index % len(tasks)]) as env:
            observation, info = env.reset()
        prompts.append(chat.prompt_ids(info["system_prompt"], observation, info["tools"]))
    return prompts


def play(first_prompts: list[list[int]], turn, observation: list[int]) -> list[list[int]]:
    """Every episode's tokens after `TURNS` turns, `turn(index, prompt) -> new tokens` called
    for one episode's turn at a time, episodes in turn."""
    episodes = [list(p) for p in first_prompts]
    for step in range(TURNS):
        for index, episode in enumerate(episodes):
            episode += turn(index, episode)
            if step < TURNS - 1:
                episode += observation
    return episodes


def run_generate(model, first_prompts, observation):
    def turn(index, prompt):
        ids = torch.tensor([prompt])
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=MAX_NEW_TOKENS,
            min_new_tokens=MAX_NEW_TOKENS,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
        return out[0, len(prompt) :].tolist()

    return play(first_prompts, turn, observation)


def run_one_at_a_time(engine, first_prompts, observation):
    def turn(index, prompt):
        return engine.generate([prompt], max_new_tokens=MAX_NEW_TOKENS, temperature=0.0, seed=index)[0].token_ids

    return play(first_prompts, turn, observation)


def run_lockstep(engine, first_prompts, observation):
    episodes = [list(p) for p in first_prompts]
    for step in range(TURNS):
        outs = engine.generate(
            episodes, max_new_tokens=MAX_NEW_TOKENS, temperature=0.0, seeds=list(range(len(episodes)))
        )
        for episode, out in zip(episodes, outs, strict=True):
            episode += out.token_ids
            if step < TURNS - 1:
                episode += observation
    return episodes


class BatchingWorker:
    """What a `TurnBatcher` needs of a worker (its lock, published weights and engine),
    without the rest of a rollout worker."""

    def __init__(self, engine, batcher=None) -> None:
        from trainer.orchestrator.turn_batching import TurnBatcher

        self.engine = engine
        self.batcher = (batcher or TurnBatcher)(threading.RLock(), lambda pinned: engine, lambda: None)


def run_slots(engine, first_prompts, observation):
    worker = BatchingWorker(engine)
    episodes = [list(p) for p in first_prompts]

    def episode(index: int) -> None:
        for step in range(TURNS):
            kwargs = {"max_new_tokens": MAX_NEW_TOKENS, "temperature": 0.0, "stop_token_ids": (), "seed": index}
            episodes[index] += worker.batcher.generate(None, episodes[index], kwargs)[0].token_ids
            if step < TURNS - 1:
                episodes[index] += observation

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(len(episodes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return episodes, worker.batcher.row_steps / max(worker.batcher.steps, 1)


def main() -> None:
    from sandboxes.console import setup_logging
    from trainer.inference.engines.hf import HFEngine
    from trainer.inference.models import load_policy, load_tokenizer
    from trainer.inference.rollout import ChatFormat

    setup_logging()
    args = arguments(
        "bench.perf.rollout",
        "Rollout throughput of the hf engine at equal outputs (temperature 0): 8 multi-turn "
        "episodes of the built-in tasks (3 turns of 32 tokens) played by Hugging Face's "
        "generate one turn at a time, by the engine one turn at a time (prefix cache), by a "
        "worker's TurnBatcher with one thread per episode (rollout.batch_turns), and in "
        "lockstep batches. Generated tokens/s, speedups against the one-at-a-time engine and "
        "generate measured in the same run, and whether all are token-identical. About a "
        "minute on 2 cores.",
        "python -m bench.perf.rollout",
    )
    chat = ChatFormat(load_tokenizer("tiny"))
    first_prompts = episode_prompts(chat)
    observation = chat.observation_ids(OBSERVATION, turn_closed=False)
    generated = EPISODES * TURNS * MAX_NEW_TOKENS
    results, runs = {}, {name: [] for name in ("generate", "one_at_a_time", "slots", "lockstep")}
    batches = []
    with torch.no_grad():
        for _ in range(REPEATS):
            for name in runs:
                model = load_policy("tiny", seed=0).eval()
                started = time.perf_counter()
                if name == "generate":
                    results[name] = run_generate(model, first_prompts, observation)
                elif name == "one_at_a_time":
                    results[name] = run_one_at_a_time(HFEngine(model), first_prompts, observation)
                elif name == "slots":
                    results[name], batch = run_slots(HFEngine(model), first_prompts, observation)
                    batches.append(batch)
                else:
                    results[name] = run_lockstep(HFEngine(model), first_prompts, observation)
                runs[name].append(time.perf_counter() - started)
                print(f"{name}: {runs[name][-1]:.1f} s", flush=True)
    seconds = {name: statistics.median(values) for name, values in runs.items()}
    batch_mean = statistics.fmean(batches)
    reference = results["one_at_a_time"]
    figures: dict[str, float] = {"episodes": EPISODES, "turns": TURNS, "generated_tokens": generated}
    for name in results:
        figures[f"tokens_per_s_{name}"] = generated / seconds[name]
    for name in ("slots", "lockstep"):
        figures[f"speedup_{name}_vs_one_at_a_time"] = seconds["one_at_a_time"] / seconds[name]
        figures[f"speedup_{name}_vs_generate"] = seconds["generate"] / seconds[name]
    figures["speedup_one_at_a_time_vs_generate"] = seconds["generate"] / seconds["one_at_a_time"]
    figures["slots_mean_batch"] = batch_mean
    for name in ("generate", "slots", "lockstep"):
        figures[f"identical_episodes_{name}"] = sum(a == b for a, b in zip(results[name], reference, strict=True))
    report("bench.perf.rollout (tiny model, CPU, temperature 0)", figures, args.json)


if __name__ == "__main__":
    main()
