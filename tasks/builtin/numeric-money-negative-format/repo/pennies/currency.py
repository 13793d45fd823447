"""Currency metadata: how many minor units make one major unit, and the symbol."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Currency:
    """An ISO 4217 currency.

    ``exponent`` is the number of decimal places of the minor unit: 2 for USD
    (100 cents to the dollar), 0 for JPY, 3 for KWD (1000 fils to the dinar).
    """

    code: str
    exponent: int
    symbol: str = ""

    @property
    def factor(self) -> int:
        """Minor units per major unit."""
        return 10**self.exponent


_REGISTRY: dict[str, Currency] = {}


def register_currency(currency: Currency) -> None:
    """Make *currency* available to :func:`get_currency` under its code."""
    if not (len(currency.code) == 3 and currency.code.isalpha() and currency.code.isupper()):
        raise ValueError(f"currency code must be three upper-case letters, got {currency.code!r}")
    if currency.exponent < 0:
        raise ValueError("exponent must not be negative")
    _REGISTRY[currency.code] = currency


def get_currency(code: str | Currency) -> Currency:
    """Look a currency up by its code (case-insensitive); a Currency is returned as is."""
    if isinstance(code, Currency):
        return code
    try:
        return _REGISTRY[code.upper()]
    except KeyError:
        raise KeyError(f"unknown currency {code!r}") from None


for _currency in (
    Currency("USD", 2, "$"),
    Currency("EUR", 2, "€"),
    Currency("GBP", 2, "£"),
    Currency("JPY", 0, "¥"),
    Currency("KWD", 3),
):
    register_currency(_currency)
