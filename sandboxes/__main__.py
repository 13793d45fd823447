"""`python -m sandboxes build DEF` builds a sandbox definition's image (a no-op when it is up
to date); `python -m sandboxes reap [--cache]` removes what dead processes' sandboxes left behind
(and, with --cache, the cached workspace images no container uses)."""

from __future__ import annotations

import argparse
import sys

from sandboxes.base import SandboxError
from sandboxes.console import setup_logging


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    parser = argparse.ArgumentParser(
        prog="python -m sandboxes",
        description=__doc__,
        epilog="example: python -m sandboxes build sandboxes/images/base.yaml",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the image of a sandbox definition (YAML)")
    build.add_argument("definition", help="path of the sandbox definition, e.g. sandboxes/images/base.yaml")
    build.add_argument("--force", action="store_true", help="rebuild even when an up-to-date image exists")
    reaping = commands.add_parser("reap", help="remove containers, fork images and directories of dead owners")
    reaping.add_argument("--cache", action="store_true", help="also remove cached workspace images no container uses")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            from sandboxes.images import build as build_image
            from sandboxes.images import load_definition

            result = build_image(load_definition(args.definition), force=args.force)
            print(f"{'cached' if result.cached else 'built'}: {result.image} ({result.seconds:.1f} s)")
        else:
            from sandboxes.reaper import reap

            print(reap(cache=args.cache))
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
