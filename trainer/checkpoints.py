"""Check a checkpoint or an exported model folder against its manifest.

    python -m trainer.checkpoints verify DIR

Every checkpoint (`runs/<name>/checkpoints/step_NNNNNN/`) and every exported model folder
(a checkpoint's `policy/`) carries `manifest.json`: the size and sha256 of each of its files
(`trainer.inference.manifest`). `verify` prints `ok: DIR (N files)`, or the first bad file
and why (missing, truncated, changed, not in the manifest, no manifest at all) and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainer.inference.manifest import MANIFEST, problems


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
