"""layered: build an application's configuration from defaults, files and overrides."""

from .config import Config
from .merge import deep_merge, merge_all

__all__ = ["Config", "deep_merge", "merge_all"]
