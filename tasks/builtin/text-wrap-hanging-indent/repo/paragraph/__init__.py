"""paragraph: greedy word wrapping for plain-text output (CLI help, emails, commit messages)."""

from .wrapping import fill, shorten, wrap

__all__ = ["fill", "shorten", "wrap"]
