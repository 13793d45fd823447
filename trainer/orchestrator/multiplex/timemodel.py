"""Per-stage time models, fitted from a short profiling phase (BiDiRL, arXiv 2607.09207).

BiDiRL's static planner picks the initial split of devices from time models of the two
stages; the paper does not publish their form, so this module chooses a small one, every
term of which the profiling phase of a run can measure:

- **Generation.** One rollout unit generating `c` episodes at once has an aggregate rate of
  `r1 * c**alpha` tokens/s, so each of them runs at `r1 * c**(alpha - 1)`. `alpha = 1`: decode
  is memory-bound and batching is free (vLLM on a GPU: each sequence as fast alone as in a
  batch); `alpha = 0`: the unit's throughput is fixed and concurrent episodes share it (the hf
  engine on CPU cores). Only episodes that are generating count in `c`: one waiting on its
  sandbox does not. Prefill of the growing context is folded into `r1`.
- **Tools.** Every turn ends in one sandbox call of `tool_seconds_per_turn` seconds, during
  which the episode does not use its unit.
- **Learner.** A step on `n` tokens over `k` data-parallel units takes
  `t(k, n) = s0 + c1 * n / (k * eff**log2(k))`: a fixed overhead `s0` (optimizer step,
  publishing weights) plus a per-token term that scales with `k` at an efficiency of `eff` per
  doubling (`eff = 1`: linear scaling). At a size the profile measured, the per-token term is
  the one measured there (`measured_seconds_per_token`); the power law covers the others (a
  real learner need not follow it: on 2 shared CPU cores, 1 -> 2 ranks nearly halves a step
  and 2 -> 4 barely changes it).
- **Switch.** Moving a unit costs `switch_to_learner_s` (rollout -> learner) or
  `switch_to_rollout_s` (learner -> rollout) seconds during which it serves neither stage.
- **Episode lengths.** Tokens and turns per episode: the empirical sample of the profile
  (`EmpiricalLengths`), or a heavy-tailed parametric shape (`LogNormalLengths`: lognormal
  tokens with a given median and sigma, clipped at the context limit), the shape agentic
  episodes are published with.

`fit(profile)` estimates all of it from plain records (see `fit`); parameters a profile
cannot determine (a single concurrency, a single learner size, no measured switch) keep
the values passed in and are named in `TimeModel.assumed`, so the logged model says what
was measured and what was assumed. Pure Python: no numpy, no torch.

Over 450 lines on purpose: `fit` estimates exactly the terms `TimeModel` uses, and reading
the two side by side is how one checks that the profiling phase measures what the model
needs.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "EmpiricalLengths",
    "LengthDistribution",
    "LogNormalLengths",
    "TimeModel",
    "TimeModelError",
    "fit",
    "lengths_from_dict",
]


class TimeModelError(ValueError):
    """A profile or a serialised time model that cannot be used (names the record and field)."""


class LengthDistribution(Protocol):
    """Tokens and turns per episode."""

    def sample(self, rng: random.Random) -> tuple[int, int]:
        """One episode's (tokens, turns)."""
        ...

    def mean_tokens(self) -> float: ...

    def mean_turns(self) -> float: ...

    def to_dict(self) -> dict: ...


@dataclass(frozen=True)
class EmpiricalLengths:
    """Episodes drawn uniformly, with replacement, from measured (tokens, turns) pairs. One
    pair is a fixed length (the hand-computable case)."""

    samples: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.samples:
            raise TimeModelError("empirical lengths: no samples")
        for tokens, turns in self.samples:
            if tokens < 1 or turns < 1:
                raise TimeModelError(f"empirical lengths: ({tokens}, {turns}): tokens and turns must be >= 1")

    def sample(self, rng: random.Random) -> tuple[int, int]:
        return self.samples[rng.randrange(len(self.samples))]

    def mean_tokens(self) -> float:
        return statistics.fmean(tokens for tokens, _ in self.samples)

    def mean_turns(self) -> float:
        return statistics.fmean(turns for _, turns in self.samples)

    def to_dict(self) -> dict:
        return {"kind": "empirical", "samples": [list(pair) for pair in self.samples]}


@dataclass(frozen=True)
class LogNormalLengths:
    """Heavy-tailed episode lengths: tokens ~ lognormal(ln median, sigma), rounded and clipped
    to [1, max_tokens] (the context limit truncates the tail, as in a real run); turns =
    ceil(tokens / tokens_per_turn). p99/p50 = exp(2.326 sigma) before clipping."""

    median_tokens: float
    sigma: float
    tokens_per_turn: float
    max_tokens: int = 0
    """0: no clipping."""

    QUANTILES = 2048
    """Quantile midpoints used for `mean_turns` (no closed form with the ceiling)."""

    def __post_init__(self) -> None:
        if self.median_tokens <= 0 or self.sigma < 0 or self.tokens_per_turn <= 0 or self.max_tokens < 0:
            raise TimeModelError(f"lognormal lengths: bad parameters {self}")

    def _tokens(self, x: float) -> int:
        tokens = max(1, round(x))
        return min(tokens, self.max_tokens) if self.max_tokens else tokens

    def _turns(self, tokens: int) -> int:
        return max(1, math.ceil(tokens / self.tokens_per_turn))

    def sample(self, rng: random.Random) -> tuple[int, int]:
        tokens = self._tokens(rng.lognormvariate(math.log(self.median_tokens), self.sigma))
        return tokens, self._turns(tokens)

    def mean_tokens(self) -> float:
        """E[min(X, max_tokens)] in closed form (rounding to whole tokens ignored)."""
        mu, s = math.log(self.median_tokens), self.sigma
        full = math.exp(mu + s * s / 2)
        if not self.max_tokens:
            return full
        if s == 0:
            return min(self.median_tokens, self.max_tokens)
        z = (math.log(self.max_tokens) - mu) / s
        phi = statistics.NormalDist().cdf
        return full * phi(z - s) + self.max_tokens * (1 - phi(z))

    def mean_turns(self) -> float:
        normal = statistics.NormalDist(math.log(self.median_tokens), self.sigma or 1e-12)
        points = ((i + 0.5) / self.QUANTILES for i in range(self.QUANTILES))
        return statistics.fmean(self._turns(self._tokens(math.exp(normal.inv_cdf(p)))) for p in points)

    def to_dict(self) -> dict:
        return {
            "kind": "lognormal",
            "median_tokens": self.median_tokens,
            "sigma": self.sigma,
            "tokens_per_turn": self.tokens_per_turn,
            "max_tokens": self.max_tokens,
        }


def lengths_from_dict(data: dict) -> LengthDistribution:
    """The inverse of `to_dict` of either length distribution."""
    kind = data.get("kind") if isinstance(data, dict) else None
    try:
        if kind == "empirical":
            return EmpiricalLengths(tuple((int(a), int(b)) for a, b in data["samples"]))
        if kind == "lognormal":
            return LogNormalLengths(
                float(data["median_tokens"]),
                float(data["sigma"]),
                float(data["tokens_per_turn"]),
                int(data.get("max_tokens", 0)),
            )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, TimeModelError):
            raise
        raise TimeModelError(f"field 'episodes': {exc!r}") from None
    raise TimeModelError(f"field 'episodes.kind': must be 'empirical' or 'lognormal', not {kind!r}")


@dataclass(frozen=True)
class TimeModel:
    """Seconds per stage as functions of the split (see the module docstring)."""

    generation_tokens_per_s: float
    """r1: tokens/s of one episode generating alone on a rollout unit."""
    learner_seconds_per_token: float
    """c1: learner seconds per trajectory token on one unit."""
    episodes: LengthDistribution
    concurrency_exponent: float = 1.0
    """alpha: a unit generating c episodes produces r1 * c**alpha tokens/s in all."""
    tool_seconds_per_turn: float = 0.0
    learner_step_overhead_s: float = 0.0
    """s0: seconds of every learner step that do not depend on its tokens."""
    dp_efficiency: float = 1.0
    """eff: data-parallel efficiency per doubling of learner units."""
    switch_to_learner_s: float = 0.0
    switch_to_rollout_s: float = 0.0
    measured_seconds_per_token: tuple[tuple[int, float], ...] = ()
    """(units, learner seconds per token on that many units) where the profile measured it:
    used there instead of the power law."""
    assumed: tuple[str, ...] = field(default=())
    """Fields the profile did not determine (kept at the values given to `fit`)."""

    def __post_init__(self) -> None:
        if self.generation_tokens_per_s <= 0 or self.learner_seconds_per_token < 0:
            raise TimeModelError("generation_tokens_per_s must be > 0 and learner_seconds_per_token >= 0")
        if not 0 < self.dp_efficiency <= 1:
            raise TimeModelError(f"field 'dp_efficiency': must be in (0, 1], not {self.dp_efficiency}")
        for name in ("tool_seconds_per_turn", "learner_step_overhead_s", "switch_to_learner_s", "switch_to_rollout_s"):
            if getattr(self, name) < 0:
                raise TimeModelError(f"field '{name}': must be >= 0")
        for units, per_token in self.measured_seconds_per_token:
            if units < 1 or per_token <= 0:
                raise TimeModelError(
                    f"field 'measured_seconds_per_token': ({units}, {per_token}) needs units >= 1, seconds > 0"
                )

    def episode_tokens_per_s(self, generating: float) -> float:
        """Tokens/s of each of `generating` (>= 1) episodes generating at once on one unit."""
        return self.generation_tokens_per_s * max(1.0, generating) ** (self.concurrency_exponent - 1)

    def learner_step_seconds(self, tokens: float, units: int, slowdown: float = 1.0) -> float:
        """t(k, n) = s0 + c1 n / (k eff^log2 k), times `slowdown` (a phase's forced slow learner);
        at a measured size k, s0 + (its measured seconds per token) n."""
        if units < 1:
            raise ValueError("a learner step needs at least one unit")
        per_token = dict(self.measured_seconds_per_token).get(units)
        if per_token is None:
            per_token = self.learner_seconds_per_token / (units * self.dp_efficiency ** math.log2(units))
        return slowdown * (self.learner_step_overhead_s + per_token * tokens)

    def switch_seconds(self, to_learner: bool) -> float:
        return self.switch_to_learner_s if to_learner else self.switch_to_rollout_s

    def mean_episode_seconds(self, episodes_per_unit: int, lengths: LengthDistribution | None = None) -> float:
        """Expected wall seconds of one episode on a unit kept full with `episodes_per_unit`.

        Of the E episodes on a unit, the fraction generating is g = gen / (gen + tool), so
        c = max(1, E g) generate at once; gen depends on c when alpha < 1. The fixed point
        is found by iteration from c = E (monotone, 100 rounds are plenty)."""
        lengths = lengths or self.episodes
        tokens, tools = lengths.mean_tokens(), lengths.mean_turns() * self.tool_seconds_per_turn
        concurrency = float(episodes_per_unit)
        for _ in range(100):
            gen = tokens / self.episode_tokens_per_s(concurrency)
            concurrency = max(1.0, episodes_per_unit * gen / (gen + tools)) if gen + tools > 0 else 1.0
        return tokens / self.episode_tokens_per_s(concurrency) + tools

    def summary(self, lengths: LengthDistribution | None = None) -> dict:
        """`to_dict` with the episode lengths reduced to their means (a log line's worth)."""
        lengths = lengths or self.episodes
        means = {"mean_tokens": round(lengths.mean_tokens(), 3), "mean_turns": round(lengths.mean_turns(), 3)}
        return {**self.to_dict(), "episodes": {"kind": lengths.to_dict()["kind"], **means}}

    def to_dict(self) -> dict:
        return {
            "generation_tokens_per_s": self.generation_tokens_per_s,
            "concurrency_exponent": self.concurrency_exponent,
            "tool_seconds_per_turn": self.tool_seconds_per_turn,
            "learner_step_overhead_s": self.learner_step_overhead_s,
            "learner_seconds_per_token": self.learner_seconds_per_token,
            "dp_efficiency": self.dp_efficiency,
            "switch_to_learner_s": self.switch_to_learner_s,
            "switch_to_rollout_s": self.switch_to_rollout_s,
            "measured_seconds_per_token": [[units, seconds] for units, seconds in self.measured_seconds_per_token],
            "episodes": self.episodes.to_dict(),
            "assumed": list(self.assumed),
        }

    @classmethod
    def from_dict(cls, data: dict) -> TimeModel:
        """The inverse of `to_dict`; an unknown, missing or mistyped field is a `TimeModelError`
        naming it."""
        if not isinstance(data, dict):
            raise TimeModelError(f"a time model is a JSON object, not {type(data).__name__}")
        names = {f.name for f in cls.__dataclass_fields__.values()}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TimeModelError(f"field '{unknown[0]}': unknown (known: {', '.join(sorted(names))})")
        for name in ("generation_tokens_per_s", "learner_seconds_per_token", "episodes"):
            if name not in data:
                raise TimeModelError(f"field '{name}': missing")
        values: dict = {}
        for name, value in data.items():
            if name == "episodes":
                values[name] = lengths_from_dict(value)
            elif name == "assumed":
                values[name] = tuple(str(v) for v in value)
            elif name == "measured_seconds_per_token":
                try:
                    values[name] = tuple((int(units), float(seconds)) for units, seconds in value)
                except (TypeError, ValueError):
                    raise TimeModelError(
                        f"field '{name}': a list of [units, seconds per token], not {value!r}"
                    ) from None
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise TimeModelError(f"field '{name}': must be a number, not {value!r}")
            else:
                values[name] = float(value)
        return cls(**values)


# -- fitting --------------------------------------------------------------------------------

EPISODE_FIELDS = ("tokens", "turns", "generation_seconds")
LEARNER_FIELDS = ("tokens", "seconds", "units")


def _number(record: dict, index: int, name: str, *, positive: bool = True, default: float | None = None) -> float:
    value = record.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or (value <= 0 if positive else value < 0):
        need = "a positive number" if positive else "a number >= 0"
        raise TimeModelError(
            f"profile record {index} ({record.get('kind')}): field '{name}' must be {need}, not {value!r}"
        )
    return float(value)


def _lstsq(rows: list[list[float]], y: list[float]) -> list[float] | None:
    """Least squares by Householder QR on column-scaled features; None if rank deficient."""
    m, n = len(rows), len(rows[0])
    if m < n:
        return None
    scale = [max(abs(row[j]) for row in rows) or 1.0 for j in range(n)]
    a = [[row[j] / scale[j] for j in range(n)] + [y[i]] for i, row in enumerate(rows)]
    for j in range(n):
        norm = math.sqrt(sum(a[i][j] ** 2 for i in range(j, m)))
        if norm < 1e-12:
            return None
        alpha = -norm if a[j][j] >= 0 else norm
        v = [0.0] * j + [a[j][j] - alpha] + [a[i][j] for i in range(j + 1, m)]
        vv = sum(x * x for x in v[j:])
        for col in range(j, n + 1):
            dot = sum(v[i] * a[i][col] for i in range(j, m)) * 2 / vv
            for i in range(j, m):
                a[i][col] -= dot * v[i]
    diag = [abs(a[j][j]) for j in range(n)]
    if min(diag) < 1e-9 * max(diag):
        return None
    x = [0.0] * n
    for j in reversed(range(n)):
        x[j] = (a[j][n] - sum(a[j][c] * x[c] for c in range(j + 1, n))) / a[j][j]
    return [x[j] / scale[j] for j in range(n)]


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """(intercept, slope) of ys on xs, or None if xs do not vary."""
    solution = _lstsq([[1.0, x] for x in xs], ys)
    return None if solution is None else (solution[0], solution[1])


def fit(
    profile: list[dict],
    *,
    concurrency_exponent: float = 1.0,
    dp_efficiency: float = 1.0,
    switch_to_learner_s: float = 0.0,
    switch_to_rollout_s: float = 0.0,
    episodes: LengthDistribution | None = None,
) -> TimeModel:
    """A `TimeModel` from profiling records (plain dicts, in any order):

    - `{"kind": "episode", "tokens", "turns", "generation_seconds", "tool_seconds"=0,
      "concurrency"=1}`: one finished episode; `generation_seconds` is the time it spent
      waiting on the engine, `tool_seconds` in its sandbox, `concurrency` the mean number of
      episodes generating on its unit meanwhile (itself included).
    - `{"kind": "learner_step", "tokens", "seconds", "units"}`: one learner step.
    - `{"kind": "switch", "direction": "to_learner" | "to_rollout", "seconds"}`: one switch.

    Estimates: r1 and alpha by least squares of ln(tokens / generation_seconds) on
    ln(concurrency) (alpha as given if one concurrency was profiled); tool seconds per turn
    = total tool seconds / total turns; s0 and a slope per learner size by least squares of
    seconds on tokens with a shared intercept, then c1 and eff by least squares of
    ln(slope_k * k) on log2(k) (eff as given for one size; s0 = 0 if tokens never varied, or
    varied too little to give every size a positive slope); with several sizes, each size's
    slope is kept too (`measured_seconds_per_token`: the model uses it at that size);
    switch seconds: the mean per direction. Exact on data drawn from the model.
    """
    by_kind: dict[str, list[tuple[int, dict]]] = {"episode": [], "learner_step": [], "switch": []}
    for index, record in enumerate(profile):
        kind = record.get("kind") if isinstance(record, dict) else None
        if kind not in by_kind:
            raise TimeModelError(f"profile record {index}: field 'kind' must be one of {sorted(by_kind)}, not {kind!r}")
        by_kind[kind].append((index, record))
    if not by_kind["episode"] or not by_kind["learner_step"]:
        raise TimeModelError("a profile needs at least one 'episode' and one 'learner_step' record")
    assumed: list[str] = []

    # Generation: ln(rate) = ln r1 + (alpha - 1) ln c.
    lengths, log_c, log_rate, tool, turns = [], [], [], 0.0, 0
    for index, record in by_kind["episode"]:
        tokens, turn_count, seconds = (_number(record, index, name) for name in EPISODE_FIELDS)
        concurrency = _number(record, index, "concurrency", default=1)
        tool += _number(record, index, "tool_seconds", positive=False, default=0)
        turns += int(turn_count)
        lengths.append((int(tokens), int(turn_count)))
        log_c.append(math.log(concurrency))
        log_rate.append(math.log(tokens / seconds))
    line = _fit_line(log_c, log_rate)
    if line is None:
        rate = math.exp(statistics.fmean(log_rate))  # geometric mean rate at the one concurrency
        r1 = rate * math.exp(log_c[0]) ** (1 - concurrency_exponent)
        assumed.append("concurrency_exponent")
    else:
        r1, concurrency_exponent = math.exp(line[0]), line[1] + 1

    # Learner: seconds = s0 + b_k tokens, one slope per size k; then b_k k = c1 eff^-log2 k.
    steps = [
        (index, *(_number(record, index, name) for name in LEARNER_FIELDS)) for index, record in by_kind["learner_step"]
    ]
    sizes = sorted({int(units) for *_, units in steps})
    rows = [[1.0] + [tokens if int(units) == k else 0.0 for k in sizes] for _, tokens, _, units in steps]
    seconds = [s for _, _, s, _ in steps]
    solution = _lstsq(rows, seconds)
    if solution is None:  # tokens never varied within a size: no overhead term
        assumed.append("learner_step_overhead_s")
        solution = [0.0] + (_lstsq([row[1:] for row in rows], seconds) or [0.0] * len(sizes))
    s0, slopes = solution[0], solution[1:]
    if min(slopes) <= 0 and "learner_step_overhead_s" not in assumed:
        # Tokens varied too little for the noise to separate overhead from per-token time (a
        # short profile of similar batches): every second per token, as when they never varied.
        assumed.append("learner_step_overhead_s")
        solution = [0.0] + [
            sum(s for (_, tokens, s, units) in steps if int(units) == k)
            / sum(tokens for (_, tokens, _, units) in steps if int(units) == k)
            for k in sizes
        ]
        s0, slopes = solution[0], solution[1:]
    if min(slopes) <= 0:
        raise TimeModelError(f"learner steps: seconds do not grow with tokens (slopes {slopes}); profile more steps")
    line = _fit_line([math.log2(k) for k in sizes], [math.log(b * k) for b, k in zip(slopes, sizes, strict=True)])
    if line is None:
        c1 = slopes[0] * sizes[0] * dp_efficiency ** math.log2(sizes[0])
        assumed.append("dp_efficiency")
    else:
        c1, dp_efficiency = math.exp(line[0]), min(1.0, math.exp(-line[1]))

    # Switches: the mean per direction.
    measured: dict[str, list[float]] = {"to_learner": [], "to_rollout": []}
    for index, record in by_kind["switch"]:
        if record.get("direction") not in measured:
            raise TimeModelError(f"profile record {index} (switch): field 'direction' must be to_learner or to_rollout")
        measured[record["direction"]].append(_number(record, index, "seconds", positive=False))
    if measured["to_learner"]:
        switch_to_learner_s = statistics.fmean(measured["to_learner"])
    else:
        assumed.append("switch_to_learner_s")
    if measured["to_rollout"]:
        switch_to_rollout_s = statistics.fmean(measured["to_rollout"])
    else:
        assumed.append("switch_to_rollout_s")

    return TimeModel(
        generation_tokens_per_s=r1,
        learner_seconds_per_token=c1,
        episodes=episodes or EmpiricalLengths(tuple(lengths)),
        concurrency_exponent=concurrency_exponent,
        tool_seconds_per_turn=tool / turns,
        learner_step_overhead_s=max(0.0, s0),
        dp_efficiency=dp_efficiency,
        switch_to_learner_s=switch_to_learner_s,
        switch_to_rollout_s=switch_to_rollout_s,
        measured_seconds_per_token=tuple(zip(sizes, slopes, strict=True)) if len(sizes) > 1 else (),
        assumed=tuple(assumed),
    )
