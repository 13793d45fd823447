"""A run's checkpoints: find the newest complete one, and check one against its manifest.

    python -m trainer.checkpoints verify DIR

Every checkpoint (`runs/<name>/checkpoints/step_NNNNNN/`) and every exported model folder
(a checkpoint's `policy/`) carries `manifest.json`: the size and sha256 of each of its files
(`trainer.inference.manifest`). `verify` prints `ok: DIR (N files)`, or the first bad file
and why (missing, truncated, changed, not in the manifest, no manifest at all) and exits 1.
`latest_checkpoint` is how a run resumes: the newest checkpoint that verifies.

What a learner writes into a checkpoint (its shards, its Hugging Face folder, `state.json`)
is `trainer.learner.checkpoint`; this module only finds and checks folders, and imports no
torch.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from trainer.inference.manifest import MANIFEST, problems

logger = logging.getLogger(__name__)


def latest_checkpoint(run_dir: Path, *, verify: bool = True) -> Path | None:
    """The newest complete checkpoint of a run: published (partial writes are dot-folders,
    skipped) with a manifest, and, when `verify`, whose files match it (sha256). Each newer
    one that does not verify is skipped with one warning naming its first bad file and why."""
    folder = run_dir / "checkpoints"
    candidates = sorted(folder.glob("step_*"), reverse=True) if folder.is_dir() else []
    for candidate in candidates:
        if not verify:
            if (candidate / MANIFEST).is_file():
                return candidate
            continue
        found = problems(candidate)
        if not found:
            return candidate
        logger.warning("skipping checkpoint %s: %s: %s", candidate.name, candidate / found[0].file, found[0].reason)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.checkpoints",
        description=__doc__.strip().splitlines()[0],
        epilog="example: python -m trainer.checkpoints verify runs/train-swe/checkpoints/step_000020",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("verify", help="check a checkpoint or model folder; exit 1 on damage")
    check.add_argument("folder", type=Path, metavar="DIR")
    args = parser.parse_args(argv)
    found = problems(args.folder)
    if found:
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        print(f"damaged: {args.folder / first.file}: {first.reason}{more}")
        return 1
    files = len(json.loads((args.folder / MANIFEST).read_text())["files"])
    print(f"ok: {args.folder} ({files} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
