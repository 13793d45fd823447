"""Every backend passes the same behaviour checks and survives the same attacks
(`sandboxes.conformance`), parametrised over `local` and `docker`."""

import pytest

from sandboxes.conformance import ATTACKS, CHECKS


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_conformance(harness, check):
    CHECKS[check](harness)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attack(harness, backend, attack):
    ATTACKS[attack](harness)
