"""The experiments of the reactor lessons that only a lesson runs (lesson 4, CEL filters).

Each function replays a window of a recorded day of quotes
(:func:`fanoutsim.load_recording`) into one seeded run of fanoutsim's reactor
design on the virtual clock, with the filter, policy and rates the lesson uses;
the numbers come from the readers in :mod:`fanoutsim.analysis`
(``subscriber_lag``, ``poll_lag``). Nothing here is part of the library: copy a
function into your notebook and change it. Every run is deterministic in its
arguments and ``seed``.

(The reactor's other lesson runs — ``crash_run``, ``retention_run``,
``hole_run`` — stay in :mod:`fanoutsim.analysis`: the exercise checkers and the
prune explorer run them too.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from fanoutsim import SchedulerConfig, Simulation, analysis


def filter_run(
    frame: pd.DataFrame,
    when: str | None,
    *,
    start: float,
    stop: float,
    speed: float = 1.0,
    tenant: str = "acme",
    policy: str = "skip",
    error_limit: int = 5,
    batch_limit: int = 100,
    workers: int = 4,
    duration: float = 0.0,
    poll_interval: float = 1.0,
    drain_s: float = 60.0,
    seed: int = 0,
    store: str = "memory",
) -> Any:
    """One seeded run: a window ``[start, stop)`` of a recording replayed at
    ``speed`` into reactor ``pricing_reactor`` (each row in its ``tenant``
    column's tenant), one subscription ``watcher`` in ``tenant`` with filter
    ``when``, under ``predicate_error_policy=policy``. The workflow runs for
    ``duration`` s on ``workers`` executor workers. Runs ``drain_s`` past the
    last firing and returns the Simulation."""
    cfg = SchedulerConfig(
        predicate_error_policy=policy,
        predicate_error_limit=error_limit,
        reactor_poll_batch_limit=batch_limit,
        executor_workers=workers,
        reactor_poll_interval=poll_interval,
    )
    sim = Simulation(config=cfg, seed=seed, store=store)
    sim.runner.register_workflow("watcher", duration=duration)
    sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "watcher", tenant=tenant, when=when)
    replay = sim.add_replay(
        frame, "pricing_reactor", tenant="tenant", speed=speed, start=start, stop=stop
    )
    sim.run(until=(replay.last_at or 0.0) + drain_s)
    return sim


def selectivity_sweep(
    frame: pd.DataFrame, filters: Mapping[str, str | None], **kwargs
) -> pd.DataFrame:
    """``analysis.subscriber_lag`` of a :func:`filter_run` per named filter
    (``{label: CEL or None}``), sorted by selectivity; ``filter`` and ``when`` first."""
    rows = []
    for label, when in filters.items():
        sim = filter_run(frame, when, **kwargs)
        rows.append({"filter": label, "when": when or "", **analysis.subscriber_lag(sim)})
    return pd.DataFrame(rows).sort_values("selectivity", kind="stable").reset_index(drop=True)


def error_policy_table(
    frame: pd.DataFrame,
    filters: Mapping[str, str],
    policies: Iterable[str] = ("skip", "hold"),
    **kwargs,
) -> pd.DataFrame:
    """Per named filter and ``predicate_error_policy``: what was dispatched,
    the errors and dead letters, the poll lag, and whether the subscription
    ended ``degraded``; ``filter`` and ``policy`` first."""
    rows = []
    for label, when in filters.items():
        for policy in policies:
            sim = filter_run(frame, when, policy=policy, **kwargs)
            lag = analysis.subscriber_lag(sim)
            sub = sim.subscriptions().iloc[0]
            rows.append(
                {
                    "filter": label,
                    "policy": policy,
                    "firings": lag["firings"],
                    "dispatched": lag["dispatched"],
                    "predicate_errors": lag["predicate_errors"],
                    "dead_letters": lag["dead_letters"],
                    "poll_lag_max_s": lag["poll_lag_max_s"],
                    "unpassed": lag["unpassed"],
                    "degraded": bool(sub["predicate_degraded"]),
                    "last_error": sub["last_predicate_error"] or "",
                }
            )
    return pd.DataFrame(rows)
