"""Declarative command-line parsing.

Supported syntax (a subset of what :mod:`argparse` accepts):

* long options: ``--name value`` and ``--name=value``;
* short options: ``-n value``, ``-nvalue`` and clusters of flags ``-vvq``;
* ``--`` ends option parsing, everything after it is positional;
* a lone ``-`` is a positional argument (conventionally standard input);
* as in argparse, tokens that look like negative numbers (``-5``, ``-0.25``) are
  values, not options, unless the parser itself defines an option that looks like
  a negative number (such as ``-1``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class ArgError(ValueError):
    """Invalid command line."""


@dataclass
class _Option:
    names: tuple[str, ...]
    dest: str
    action: str  # "store", "append", "flag" or "count"
    type: Callable[[str], Any] = str
    default: Any = None

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append")


@dataclass
class _Positional:
    name: str
    type: Callable[[str], Any] = str
    nargs: str = "1"  # "1", "?" or "*"
    default: Any = None


@dataclass
class ArgParser:
    """Collects option and positional definitions, then parses argument lists.

    >>> p = ArgParser()
    >>> p.option("-n", "--count", type=int, default=1)
    >>> p.flag("-v", "--verbose", count=True)
    >>> p.positional("files", nargs="*")
    >>> p.parse(["-vv", "--count=3", "a.txt", "b.txt"])
    namespace(count=3, verbose=2, files=['a.txt', 'b.txt'])
    """

    _options: dict[str, _Option] = field(default_factory=dict)
    _order: list[_Option] = field(default_factory=list)
    _positionals: list[_Positional] = field(default_factory=list)

    # -- definitions -----------------------------------------------------------

    def _add(self, names: Sequence[str], dest: str | None, **kwargs: Any) -> None:
        if not names or not all(n.startswith("-") and n.strip("-") for n in names):
            raise ValueError(f"option names must start with '-': {names!r}")
        for name in names:
            if not name.startswith("--") and len(name) != 2:
                raise ValueError(f"short options are a single character: {name!r}")
            if name in self._options:
                raise ValueError(f"duplicate option {name}")
        longest = max(names, key=len)
        opt = _Option(tuple(names), dest or longest.lstrip("-").replace("-", "_"), **kwargs)
        for name in names:
            self._options[name] = opt
        self._order.append(opt)

    def option(self, *names: str, type: Callable[[str], Any] = str, default: Any = None,
               dest: str | None = None, append: bool = False) -> None:
        """An option that takes a value (repeatable into a list with ``append=True``)."""
        self._add(names, dest, action="append" if append else "store", type=type,
                  default=[] if append and default is None else default)

    def flag(self, *names: str, dest: str | None = None, count: bool = False) -> None:
        """A boolean switch, or a counter (``-vvv``) with ``count=True``."""
        self._add(names, dest, action="count" if count else "flag", default=0 if count else False)

    def positional(self, name: str, type: Callable[[str], Any] = str, nargs: str = "1", default: Any = None) -> None:
        if nargs not in ("1", "?", "*"):
            raise ValueError(f"unsupported nargs {nargs!r}")
        if self._positionals and self._positionals[-1].nargs == "*":
            raise ValueError("no positional may follow one with nargs='*'")
        self._positionals.append(_Positional(name, type, nargs, default))

    # -- parsing ---------------------------------------------------------------

    def _lookup(self, name: str) -> _Option:
        try:
            return self._options[name]
        except KeyError:
            raise ArgError(f"unknown option {name}") from None

    @staticmethod
    def _convert(opt_name: str, convert: Callable[[str], Any], raw: str) -> Any:
        try:
            return convert(raw)
        except ValueError:
            raise ArgError(f"invalid value for {opt_name}: {raw!r}") from None

    def _store(self, values: dict[str, Any], opt: _Option, name: str, raw: str | None) -> None:
        if opt.action == "flag":
            values[opt.dest] = True
        elif opt.action == "count":
            values[opt.dest] += 1
        elif opt.action == "append":
            values[opt.dest] = values[opt.dest] + [self._convert(name, opt.type, raw)]
        else:
            values[opt.dest] = self._convert(name, opt.type, raw)

    def _value_after(self, argv: Sequence[str], i: int, name: str) -> str:
        """The argument following the option at *i*, which must not be another option."""
        if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
            raise ArgError(f"option {name} requires a value")
        return argv[i + 1]

    def parse(self, argv: Sequence[str]) -> SimpleNamespace:
        values: dict[str, Any] = {opt.dest: opt.default for opt in self._order}
        free: list[str] = []
        i = 0
        only_positional = False
        while i < len(argv):
            token = argv[i]
            if only_positional or token == "-" or not token.startswith("-"):
                free.append(token)
            elif token == "--":
                only_positional = True
            elif token.startswith("--"):
                name, eq, inline = token.partition("=")
                opt = self._lookup(name)
                if opt.takes_value:
                    if not eq:
                        inline = self._value_after(argv, i, name)
                        i += 1
                    self._store(values, opt, name, inline)
                elif eq:
                    raise ArgError(f"option {name} takes no value")
                else:
                    self._store(values, opt, name, None)
            else:
                for j in range(1, len(token)):
                    name = "-" + token[j]
                    opt = self._lookup(name)
                    if not opt.takes_value:
                        self._store(values, opt, name, None)
                        continue
                    rest = token[j + 1 :]
                    if not rest:
                        rest = self._value_after(argv, i, name)
                        i += 1
                    self._store(values, opt, name, rest)
                    break
            i += 1
        values.update(self._assign_positionals(free))
        return SimpleNamespace(**values)

    def _assign_positionals(self, free: list[str]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        required = sum(1 for p in self._positionals if p.nargs == "1")
        if len(free) < required:
            missing = [p.name for p in self._positionals if p.nargs == "1"][len(free):]
            raise ArgError(f"missing positional argument(s): {', '.join(missing)}")
        spare = len(free) - required
        pos = 0
        for p in self._positionals:
            if p.nargs == "1":
                result[p.name] = self._convert(p.name, p.type, free[pos])
                pos += 1
            elif p.nargs == "?":
                if spare:
                    result[p.name] = self._convert(p.name, p.type, free[pos])
                    pos += 1
                    spare -= 1
                else:
                    result[p.name] = p.default
            else:
                result[p.name] = [self._convert(p.name, p.type, raw) for raw in free[pos : pos + spare]]
                pos += spare
                spare = 0
        if pos < len(free):
            raise ArgError(f"unexpected argument(s): {' '.join(free[pos:])}")
        return result
