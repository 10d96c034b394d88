"""What the reactor design's two runtimes share: the runner API's plumbing
and the table views.

A runtime (virtual clock or wall clock) owns a store, a registry, the current
engine incarnation (None while the runner is down) and a clock.
:class:`RunnerHost` turns those into the public surface: ``fire``,
``poll_once``, ``prune_once`` and the DataFrame views of the three tables,
the trace and the metrics.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import pandas as pd

from fanoutsim.designs.reactor.engine import ReactorEngine
from fanoutsim.designs.reactor.faults import FAULTS, check_names
from fanoutsim.designs.reactor.payload import decode_sources
from fanoutsim.kernel.frames import store_frame
from fanoutsim.kernel.runtime.faces import checked_config as checked


def checked_config(config, seed):
    """The reactor runtimes' common arguments: a SchedulerConfig (None: the
    defaults) and an int seed; returns the config."""
    from fanoutsim.designs.reactor.config import SchedulerConfig

    return checked(config, seed, SchedulerConfig)


def _sources(blob) -> dict | None:
    """A payload decoded as subscribers see it; None if the bytes are not a payload."""
    try:
        return decode_sources(bytes(blob))
    except (ValueError, TypeError, UnicodeDecodeError, struct.error):
        return None


def with_sources(firings: pd.DataFrame) -> pd.DataFrame:
    """The firings with ``sources`` beside ``payload``: what the stored bytes
    decode to, what a subscriber sees (``{"quote": {"price": 150}}``)."""
    firings.insert(
        firings.columns.get_loc("payload") + 1,
        "sources",
        pd.Series([_sources(p) for p in firings["payload"]], index=firings.index, dtype=object),
    )
    return firings


def with_context(executions: pd.DataFrame) -> pd.DataFrame:
    """The executions with their JSON ``context`` as a dict, and its
    ``reactor_firing_id`` and ``reactor_name`` lifted into columns of their own
    (every analysis joins on them)."""
    contexts = [json.loads(c) for c in executions["context"]]
    executions["context"] = pd.Series(contexts, index=executions.index, dtype=object)
    for at, name in ((2, "reactor_firing_id"), (3, "reactor_name")):
        executions.insert(at, name, pd.Series([c.get(name) for c in contexts], index=executions.index, dtype=object))
    return executions


class RunnerHost:
    """Mixin: needs ``store``, ``_api(step, ...)`` (one step of the live engine
    now; raises while the runner is down; None if a crash took it down),
    ``_trace``, ``metrics_registry``, ``registry``, ``plan`` and ``_checked``."""

    # a plan's crash points must be the reactor's (checked as the runtime is made); every kind acts here
    crash_points = FAULTS.points
    fault_hooks = FAULTS.hook_names

    def check_plan(self) -> None:
        """Refuse a fault plan that names a workflow or a subscription that does not
        exist (a ValueError listing the known ones): a fault that names nothing would
        never act. :meth:`run` asks it before the clock first moves."""
        with self.store.transaction() as tx:
            subs = [(s["reactor_name"], s["workflow_name"], s["tenant_id"]) for s in tx.list_subscriptions()]
        check_names(self.plan, set(self.registry.workflows), subs)
        self._checked = True

    def fire(
        self, reactor: str, sources: Mapping[str, Any], tenant: str = "public", *, graph: str | None = None
    ) -> str:
        """Fire ``reactor`` now in ``tenant`` with the payload ``{source name: value}``:
        the in-process computation graphs subscribed to it run first, then one
        ``reactor_firings`` row is written, which the poll loop dispatches to the
        subscribed workflows. ``graph`` labels the firing's metric (default: the
        reactor). Returns the firing id (None if a crash took the runner down before
        the row was logged). Refuses, before anything runs: an empty reactor or
        tenant name (ValueError), a payload that is not a mapping of non-empty names
        to encodable values (TypeError); while the runner is down, a RuntimeError."""
        return self._api(ReactorEngine.fire, reactor, sources, tenant, graph=graph)

    def fire_trigger(self, name: str, context: dict | None = None) -> dict:
        """Fire the trigger ``name`` (trigger-name fan-out, kept for contrast): every
        workflow subscribed to it gets an execution now, each with its own copy of
        ``context`` — no log, no watermark, no redelivery. Returns workflow ->
        execution id (None where a secondary subscriber's insert failed); raises
        :class:`~fanoutsim.designs.reactor.triggers.TriggerFireFailed` if the primary's
        failed, RuntimeError while the runner is down."""
        return self._api(ReactorEngine.fire_trigger, name, context)

    def poll_once(self):
        """One pass of the poll loop, now, by hand: for each enabled subscription,
        fetch the firings past its watermark (up to the batch limit), evaluate its
        filter, dispatch the matching ones as executions and move the watermark.
        Returns the pass's counts (a ``PollStats``: subscriptions, fetched,
        dispatched, ...); None if a crash took the runner down in it; RuntimeError
        while it is down."""
        return self._api(ReactorEngine.poll_once)

    def prune_once(self) -> int:
        """One pass of the prune loop, now, by hand: delete the firings older than
        ``reactor_firings_retention`` (under ``prune_policy="conservative"`` only
        those every subscription's watermark has passed), in chunks. Returns the rows
        deleted (None if a crash took the runner down in it); RuntimeError while it
        is down."""
        return self._api(ReactorEngine.prune_once)

    # -- looking at it ---------------------------------------------------------
    def firings(self) -> pd.DataFrame:
        """The committed ``reactor_firings`` rows, one per firing, with ``sources``
        beside the stored ``payload`` bytes: what they decode to, as a subscriber
        sees it. Timestamps are timezone-aware datetimes."""
        return with_sources(store_frame(self.store, "reactor_firings"))

    def subscriptions(self, tenant: str | None = None) -> pd.DataFrame:
        """The committed ``reactor_subscriptions`` rows (of ``tenant`` only, when
        given): each subscription's reactor, workflow, filter and watermark."""
        df = store_frame(self.store, "reactor_subscriptions")
        if tenant is not None:
            df = df[df["tenant_id"] == tenant].reset_index(drop=True)
        return df

    def executions(self) -> pd.DataFrame:
        """The committed ``workflow_executions`` rows, one per dispatch, with the
        JSON ``context`` as a dict and its ``reactor_firing_id`` and
        ``reactor_name`` as columns of their own (every analysis joins on them)."""
        return with_context(store_frame(self.store, "workflow_executions"))

    def trace(self) -> pd.DataFrame:
        """The run's trace, one row per event (fired, polled, dispatched, crashed,
        ...), in the reactor's names: ``subscription``, ``firing``, ``reactor``.
        Empty when the run was made with ``trace=False``."""
        return self._trace.frame()

    def trace_columns(self) -> tuple[dict[str, list], dict[str, list]]:
        """The trace's events and firing history as columns, no frame built
        (see :meth:`fanoutsim.kernel.trace.Trace.columns`): the checker reads these."""
        return self._trace.columns()

    def metrics(self) -> dict[str, float]:
        """Every metric now, in the Prometheus style (``{'name{label="value"}': number}``):
        the run's counters and histograms, and its gauges read from the
        tables now (:mod:`fanoutsim.designs.reactor.metrics` says what each means)."""
        from fanoutsim.designs.reactor.metrics import watermark_lags

        out = self.metrics_registry.as_dict()
        out.setdefault("fanoutsim_reactor_firings_pruned_total", 0)
        with self.store.transaction() as tx:
            out["fanoutsim_reactor_firings_retained"] = tx.count_firings()
        out.update(
            watermark_lags(self.store.rows("reactor_subscriptions"), self.store.rows("reactor_firings"), self.now_us())
        )
        return out
