"""Turning titles into slugs.

The pipeline is: transliterate to ASCII (accents are dropped, a few ligatures and
special letters are spelled out), optionally lowercase, split into words at every
run of characters that are neither letters, digits nor listed in ``keep``, drop
stop words, join the words with the separator (collapsing repeats, which appear
when kept characters include the separator), trim separators from both ends, and
finally cut the slug at a separator boundary so it fits in ``max_length``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable

_SPECIAL = {
    "ß": "ss",
    "æ": "ae",
    "Æ": "AE",
    "ø": "o",
    "Ø": "O",
    "œ": "oe",
    "Œ": "OE",
    "đ": "d",
    "Đ": "D",
    "ł": "l",
    "Ł": "L",
    "þ": "th",
    "&": " and ",
}


def _ascii(text: str) -> str:
    text = "".join(_SPECIAL.get(ch, ch) for ch in text)
    decomposed = unicodedata.normalize("NFKD", text)
    return decomposed.encode("ascii", "ignore").decode("ascii")


def slugify(
    text: str,
    separator: str = "-",
    lowercase: bool = True,
    max_length: int | None = None,
    stopwords: Iterable[str] = (),
    keep: str = "",
) -> str:
    """Make a slug from *text*.

    >>> slugify("Crème Brûlée & Co.")
    'creme-brulee-and-co'
    >>> slugify("Hello, World!", separator="_", lowercase=False)
    'Hello_World'
    >>> slugify("notes v1.2.txt", keep=".")
    'notes-v1.2.txt'
    """
    if not separator:
        raise ValueError("separator must not be empty")
    text = _ascii(text)
    if lowercase:
        text = text.lower()
    not_word = re.compile(f"[^A-Za-z0-9{re.escape(keep)}]+")
    words = [w for w in not_word.split(text) if w]
    stop = {s.lower() for s in stopwords}
    if stop:
        kept = [w for w in words if w.lower() not in stop]
        words = kept or words  # never strip a title down to nothing
    slug = separator.join(words)
    slug = re.sub(f"{separator}{{2,}}", separator, slug)
    slug = slug.strip(separator)
    if max_length is not None:
        slug = _truncate(slug, separator, max_length)
    return slug


def _truncate(slug: str, separator: str, max_length: int) -> str:
    """Cut *slug* to at most *max_length* characters, preferring a separator boundary."""
    if max_length < 1:
        raise ValueError("max_length must be positive")
    if len(slug) <= max_length:
        return slug
    cut = slug[:max_length]
    if slug[max_length : max_length + len(separator)] == separator:
        return cut
    boundary = cut.rfind(separator)
    if boundary > 0:
        return cut[:boundary]
    return cut


def unique_slug(text: str, exists: Callable[[str], bool], separator: str = "-", **options) -> str:
    """A slug for *text* for which ``exists(slug)`` is false, adding ``-2``, ``-3``... if needed.

    >>> taken = {"report", "report-2"}
    >>> unique_slug("Report", taken.__contains__)
    'report-3'
    """
    base = slugify(text, separator=separator, **options)
    if not exists(base):
        return base
    n = 2
    while exists(f"{base}{separator}{n}"):
        n += 1
    return f"{base}{separator}{n}"
