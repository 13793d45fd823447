"""tinytpl: ``$name`` / ``${name|filter}`` string templates for config files and messages."""

from .engine import FILTERS, Template, TemplateError, render

__all__ = ["FILTERS", "Template", "TemplateError", "render"]
