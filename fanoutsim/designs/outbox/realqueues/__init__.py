"""The outbox model against real PostgreSQL job queues: procrastinate and pgqueuer.

The outbox design is what the Postgres job queues people run do: a row and a
NOTIFY hint in one commit, a worker woken by the hint or by its poll. This
package runs one worker of each library on a real PostgreSQL under a seeded
Poisson load, records commit -> handled for each job, runs the outbox model with
the library's preset (:mod:`fanoutsim.designs.outbox.presets`) on the same
commits and the same lost hints, and compares the two::

    from fanoutsim.designs.outbox.realqueues import run_real_all, compare, TABLE_HEAD

    runs = run_real_all()                 # 2 libraries x 3 cases, on an embedded PostgreSQL
    print(TABLE_HEAD)
    for (library, case), run in runs.items():
        costs = session_costs(r for (lib, _), r in runs.items() if lib == library)
        print(compare(run, measured=costs).row())  # p50 / p90 / p99 and two-sample KS, real vs model

Needs the ``realqueues`` and ``postgres`` extras (``make setup`` installs both).

=======================  ==============================================================
``load.py``              the seeded Poisson load, and the three cases of hint loss
``harness.py``           a run per (library, case), each in a new database; several at once
``procrastinate_run.py`` procrastinate's own worker, its notification handler wrapped
``pgqueuer_run.py``      pgqueuer's own ``QueueManager``, its listener callback wrapped
``producer.py``          the producer process (``producer_process.py``), the terminations
``commitclock.py``       each job's commit time, by the server's clock at COMMIT
``record.py``            what a run recorded (:class:`RealRun`); percentiles, KS
``model.py``             the model on a real run's commits and losses; :func:`compare`
``hintcost.py``          measures the hint cost the presets use (``hint_cost.json``)
=======================  ==============================================================
"""

from fanoutsim.designs.outbox.realqueues.harness import LIBRARIES, run_real, run_real_all
from fanoutsim.designs.outbox.realqueues.load import CASES, Case, PoissonLoad
from fanoutsim.designs.outbox.realqueues.model import (
    TABLE_HEAD,
    Comparison,
    compare,
    model_latencies,
    model_run,
    session_costs,
)
from fanoutsim.designs.outbox.realqueues.record import RealRun, ks_2samp, ks_critical, percentiles

__all__ = [
    "LIBRARIES",
    "CASES",
    "Case",
    "PoissonLoad",
    "RealRun",
    "run_real",
    "run_real_all",
    "compare",
    "Comparison",
    "model_run",
    "model_latencies",
    "session_costs",
    "TABLE_HEAD",
    "ks_2samp",
    "ks_critical",
    "percentiles",
]
