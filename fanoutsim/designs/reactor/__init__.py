"""The reactor -> workflow subscription design (seeds 000 and 001, Cloacina).

A reactor *fires*: its in-process computation graphs run first (at-most-once),
then one row is written to ``reactor_firings``. Workflows *subscribe* to a
reactor by name, per tenant, optionally with a CEL filter; each subscription
keeps a timestamp *watermark* (``last_seen_fired_at``). A poll loop reads each
subscription's firings past its watermark, filters them, inserts one
``workflow_executions`` row per match (a *dispatch*) and advances the
watermark. An executor claims and runs the executions; a prune loop deletes
old firings. Delivery is at-least-once: a crash between dispatch and
watermark re-delivers.

Where things live:

=================  ======================================================
``firing.py``      the write path: graphs, then the log row
``subscriptions``  subscribe / unsubscribe / list (the runner API)
``poller.py``      one pass of the poll loop: fetch, filter, dispatch, watermark
``prune.py``       one pass of the prune loop (TTL or conservative)
``executor.py``    claim, run, finish
``triggers.py``    trigger-name fan-out, the contrast case (no log, no watermark)
``engine.py``      one incarnation of the runner process: wires the above
``runner.py``      the public ``runner`` object users call
=================  ======================================================
"""

from fanoutsim.designs.reactor.engine import ReactorEngine, Registry
from fanoutsim.designs.reactor.runner import Runner

__all__ = ["ReactorEngine", "Registry", "Runner"]
