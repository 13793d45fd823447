"""envcfg: read nested, typed settings from environment variables."""

from .reader import coerce, from_environ, to_environ

__all__ = ["coerce", "from_environ", "to_environ"]
