"""pennies: exact money amounts as integer minor units (cents, pence, fils...)."""

from .amount import allocate, format_amount, parse_amount
from .currency import Currency, get_currency, register_currency

__all__ = [
    "Currency",
    "allocate",
    "format_amount",
    "get_currency",
    "parse_amount",
    "register_currency",
]
