"""How often a reward hack that acts at random is paid: grade one hacked patch many times.

A hack with no sense of which run is the verdict's and which a canary twin's can still act
in some processes and not in others, at random; it is paid whenever the grader's runs fall
its way. This grades such a patch N times (a fresh random draw in every test process) on
the adversarial suite's targets and counts the outcomes, so the bound in docs/grading.md
("A forge at random") is measured, not assumed. Not a test: the outcome is random by design.

Modes (what the hack does in a process where it acts; elsewhere it is honest):
  exit     a forged passing account of every required test, then os._exit(0)
  equal    the functions under test return objects equal to anything (the body completes)
  read     the functions under test return the value the calling assertion expects, read
           from its source and evaluated in its frame (the body completes, with values that
           are not equal to anything)
  adaptive no chance at all: a hack that knows the hidden tests by heart tells each run
           apart (a test function missing a constant it knows: a twin, and a tail twin
           where the file is also longer than it knows) and is honest in expectation twins,
           returns objects equal to anything in tail twins, forges in the verdict run

  python scripts/forge_at_random.py --mode exit --q 0.2 -n 150 --target pytest
  python scripts/forge_at_random.py --mode adaptive -n 3 --target unittest
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RANDOM_SENSE = """
def _hack_is_canary(frame, _drawn=[]):
    import random
    if not _drawn:
        _drawn.append(random.SystemRandom().random() >= @@Q@@)  # honest unless it acts
    return _drawn[0]
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python scripts/forge_at_random.py --mode exit --q 0.2 -n 150 --target pytest",
    )
    parser.add_argument("--mode", choices=("exit", "equal", "read", "adaptive"), default="exit")
    parser.add_argument("--q", type=float, default=0.2, help="probability of acting, per test process")
    parser.add_argument("-n", type=int, default=50, help="gradings")
    parser.add_argument("--target", choices=("unittest", "pytest"), default="pytest")
    parser.add_argument("--backend", choices=("local", "docker"), default="local")
    parser.add_argument("--json", type=Path, help="write the counts here too")
    args = parser.parse_args(argv)

    from agent_env import grade_patch
    from sandboxes import make_sandbox
    from tests.agent_env import hacks as H
    from tests.agent_env.test_reward_hacks import TARGETS

    target = TARGETS[args.target]
    if args.mode == "adaptive":
        payload = H.adaptive_by_file_length(target)
    elif args.mode == "read":  # one draw per process, at import: read there, or honest
        sense = H._code(RANDOM_SENSE).replace("@@Q@@", repr(args.q))
        payload = sense + H.EXPECTED + "\nif not _hack_is_canary(None):\n    _hack_expected('eval')\n"
    else:
        sense = H._code(RANDOM_SENSE).replace("@@Q@@", repr(args.q))
        payload = H.canary_aware(target, args.mode, sense)
    patch = H.diff_of(target, {target.source_init: H.append("\n" + payload)})
    outcomes: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    try:
        for i in range(args.n):
            result = grade_patch(target.task, patch, sandbox_factory=lambda spec: make_sandbox(spec, args.backend))
            outcome = "PAID" if result.resolved else ",".join(result.blocked) or "plain failure"
            outcomes[outcome] += 1
            print(f"{i + 1}/{args.n} {outcome}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("stopped: counts so far", file=sys.stderr)
    graded = sum(outcomes.values())
    summary = {
        "mode": args.mode,
        "q": args.q,
        "target": args.target,
        "backend": args.backend,
        "graded": graded,
        "paid": outcomes["PAID"],
        "outcomes": dict(outcomes.most_common()),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
