# %% [markdown]
# # fanoutsim · Notebooks
#
# Fifteen lessons on durable event fan-out: a publisher writes events to a durable log, and
# many consumers each read it at their own pace, with at-least-once delivery, filters,
# retention and failure handling. Each lesson runs seeded simulations of real designs — a
# virtual day passes in seconds — so you can watch latency, duplicates, losses and pruning
# *emerge*, and reproduce any of it.
#
# **How a lesson works.** Its first cell says what you will learn, what you need first and how
# long **Run › Run All Cells** takes. Then short sections: a question to answer before you run
# (**Predict**), the run that settles it, and its answer, folded under **Show the answer** until
# you have decided. Each lesson ends with two or three exercises — a function you write against
# the public API (`import fanoutsim as fs`), marked by a checker that says *right* or gives a
# hint; a solution is in the collapsed cell below each, labelled **Solution (open after
# trying)** — and with its take-away, written from the numbers the run computed. The lessons open with their outputs saved: you can read any of them without running
# a cell. A control (a slider, a choice) needs a running kernel to move: it says so where it
# stands until you run its cell.
#
# ## The systems the lessons model
#
# | system | what it is | what the lessons model |
# |---|---|---|
# | **Cloacina** | a workflow engine. A *reactor* publishes firings (a price quote, say) to a `reactor_firings` table; workflows subscribe to a reactor by name, with an optional CEL filter; a poll loop reads each subscription's firings past its timestamp watermark and inserts workflow executions. | lessons 0-7 and 13: the poll wait and the latency budget, duplicates from crashes and the idempotency recipe, the TTL prune, CEL filters and their errors, the holes of a timestamp watermark, the poll interval's trade-off, the same engine on the wall clock and on PostgreSQL |
# | **Subspace** | a product whose every change of durable state appends an outbox row in the same transaction; one dispatcher, woken by a `NOTIFY` hint or a periodic safety poll, fans the rows out to consumers (search, mail, live pages), each with its own cursor. | lessons 8, 9, 13 and 14: lost hints and the safety poll, timeouts, retry budgets and parking, slow and late consumers, derived state under at-least-once, the reserved LISTEN connection, late commits; the job queues procrastinate and pgqueuer as outboxes, Kafka's offsets as cursors, CDC relays |
# | **RiffDB** | a database with durable consumers: events appended in commits to partitions, consumed by leases (a token, an incarnation, an expiry), resolved only by an exact ack; nack, dead letters, seek, retire, restore. | lessons 10, 11 and 14: lease length against work time, the cost of a long lease, two readings of partition order, poison events, in-flight limits, the retention fence, restore and backup, consumer identity; SQS's visibility timeout as a lease; JetStream's AckWait and Redis's claims as leases, against real servers |
#
# [Lesson 12](12_three_designs.ipynb) runs one workload through all three;
# [lesson 14](14_systems_you_run.ipynb) finds them in systems you may run: procrastinate and
# pgqueuer, Kafka consumer groups, SQS, a CDC relay such as Debezium, NATS JetStream and Redis
# Streams.
#
# ## The lessons
#
# | notebook | what you will learn | Run All |
# |---|---|---|
# | [00_tour](00_tour.ipynb) | The three tables between a firing and a workflow; a watermark moving one poll at a time; what a filter decides. | about 2 s |
# | [01_latency_budget](01_latency_budget.ipynb) | The shape of the poll wait; the whole path stacked against Cloacina's ~500 ms; a batch limit too small. A control: P × batch limit. | about 6 s |
# | [02_duplicate_deliveries](02_duplicate_deliveries.ipynb) | Which crash costs a duplicate, how many under each commit mode, and the recipe that makes it harmless. A control: crash point × commit mode. | about 8 s |
# | [03_prune_and_ttl](03_prune_and_ttl.ipynb) | The table under retention; a stalled subscriber under a TTL and under a conservative prune; a subscription that never reads. A control: retention, pause, policy. | about 4 s |
# | [04_cel_filters](04_cel_filters.ipynb) | What a filter saves and what it does not; `skip` and `hold` when it fails; what is caught at subscribe time. | about 6 s |
# | [05_watermark_holes](05_watermark_holes.ipynb) | Ties, late commits, clock skew and several pollers against a timestamp watermark; what each fix closes and costs. | about 5 s |
# | [06_poll_interval_sweep](06_poll_interval_sweep.ipynb) | A sweep of poll interval × batch limit: latency, database load, the knee, a recommendation; the same on Dask. | about 15 s |
# | [07_real_time_vs_virtual](07_real_time_vs_virtual.ipynb) | The same engine on the virtual clock and the wall clock; a live view. | about 28 s |
# | [08_outbox](08_outbox.ipynb) | What a lost hint costs; timeouts, parking, independent cursors. A control: hints dropped × safety poll. | about 4 s |
# | [09_outbox_derived_state](09_outbox_derived_state.ipynb) | Derived state under at-least-once; the reserved LISTEN connection; the outbox on the wall clock. | about 10 s |
# | [10_leases](10_leases.ipynb) | Leases against work time; the cost of a long lease; head-of-line against RiffDB's rule; poison events; in-flight limits. A control: work law × lease. | about 13 s |
# | [11_leases_restore_identity](11_leases_restore_identity.ipynb) | The retention fence; restore, backup and restore; consumer identity. | about 3 s |
# | [12_three_designs](12_three_designs.ipynb) | One workload, three designs: latency, database load, duplicates, losses, and which design for which need. | about 2 s |
# | [13_postgres](13_postgres.ipynb) | The model against a real PostgreSQL: the poll wait, a killed listener, late commits, several pollers. | about 22 s |
# | [14_systems_you_run](14_systems_you_run.ipynb) | The outbox in procrastinate and pgqueuer: what a lost `NOTIFY` costs, the lost wake-up and its fix; Kafka offsets, SQS visibility timeouts and CDC relays in the kit's terms; JetStream's AckWait for a duplicate target and a killed consumer on JetStream and Redis, against real servers. | about 12 s |
#
# The times are for Run All — the cells' run, the kernel already up — measured on a shared
# two-core machine; when its other work loads it, a lesson can take two or three times as long.
# The lessons are built from the scripts in `notebooks/src/` by `notebooks/build.py`, which
# executes them. The experiments the leases lessons and lesson 12 run are modules beside them,
# to read and to change: [`experiments/leases.py`](experiments/leases.py) and
# [`experiments/three_designs.py`](experiments/three_designs.py).
#
# ## Glossary
#
# - **at-least-once** — every event reaches every consumer, possibly more than once: progress is
#   recorded after the effect, so a crash between the two repeats the effect. The cure is an
#   **idempotent** consumer, one for which a second delivery changes nothing.
# - **batch limit** — the most firings (or rows, or leases) one read takes.
# - **checkpoint** — (RiffDB) a consumer's position in a partition: every event up to it is
#   resolved (acknowledged or dead-lettered). Retention and a restart read it.
# - **CEL filter** — a boolean expression over an event (`payload.quote.price > 100`) that decides
#   whether a subscription dispatches it.
# - **cursor** — (Subspace) a consumer's position in the outbox: the last seq it has durably
#   handled. It moves only after the effect; each consumer has its own.
# - **dead letter** — an event set aside after too many failed attempts (RiffDB: the 10th; a
#   Cloacina filter: the 5th error), so that later events go on. Subspace *parks* a row instead.
# - **duplicate** — a second delivery of the same event to the same consumer; the checkers name
#   its cause (`crash`, `lease_expired`, `several_pollers`, `restore`, ...).
# - **fence** (retention fence) — (RiffDB) the oldest commit a consumer still needs: retention
#   never prunes past the lowest fence of all consumers.
# - **firing** — (Cloacina) one event of a reactor, one row in `reactor_firings`.
# - **hint** — (Subspace) a `NOTIFY` carrying only a row's seq: it wakes the dispatcher early,
#   and may be lost without losing the row.
# - **incarnation** (history incarnation) — (RiffDB) a number a restore raises; a lease token of
#   an older incarnation fails closed.
# - **knee** — the rate at which a reader stops keeping up: a stream faster than batch limit /
#   poll interval.
# - **lease** — (RiffDB) the right to work on one event until an expiry, with a token; only an
#   ack with that token resolves the event. A worker that outlives its lease causes a duplicate.
# - **nack** — a consumer's "failed, retry later" for a leased event: a failed attempt.
# - **partition** — a stream's unit of order: events of one partition are resolved in order.
# - **poll interval** (P) — how often a poll loop reads; a firing waits for the next poll,
#   uniform on [0, P).
# - **reactor** — (Cloacina) a publisher of firings; workflows subscribe to it by name.
# - **retention** — how long the log keeps events before pruning them; a **TTL** prunes whatever
#   the readers say.
# - **safety poll** — (Subspace) the dispatcher's periodic read, whatever the hints: the bound on
#   the cost of a lost hint.
# - **seed** — the number that makes a run's random draws the same every time.
# - **sparse resolution** — (RiffDB) an ack of an event past the checkpoint, held until every
#   earlier event is resolved; then the checkpoint jumps past all of them.
# - **subscription** — (Cloacina) a workflow's standing interest in a reactor's firings, with a
#   watermark and an optional filter.
# - **virtual clock** — SimPy's clock: time passes only from one event to the next, so a day runs
#   in seconds and the engine's own work takes no time.
# - **watermark** — (Cloacina) a subscription's position: the `fired_at` of the last firing it
#   read. The poll reads `fired_at > watermark`; a firing that appears below it is never read.
