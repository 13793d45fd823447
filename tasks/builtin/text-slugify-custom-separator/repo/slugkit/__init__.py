"""slugkit: URL- and filename-safe slugs from arbitrary titles."""

from .slug import slugify, unique_slug

__all__ = ["slugify", "unique_slug"]
