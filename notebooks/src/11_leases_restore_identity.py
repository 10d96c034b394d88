# %% [markdown]
# # 11 · Leased consumers: the fence, restore, backup and identity
#
# **What you will learn**
# - what holds history back from retention: each consumer's *retention fence*, the commit of
#   its checkpoint — and what a consumer that stopped reading does to it;
# - what a restore does to the history, to the leases out and to their tokens (a new history
#   *incarnation*);
# - what a restore from backup costs, as the checker names it, and why a module change makes
#   a new durable consumer rather than rebinding the old one.
#
# **What you need first:** [10 · Leased consumers](10_leases.ipynb): leases, tokens, acks,
# checkpoints; [3 · Prune and TTL](03_prune_and_ttl.ipynb): retention against a stalled reader.
#
# **Run All:** about 3 s on two cores.
#
# **The system modelled.** RiffDB's durable consumers, as in lesson 10, and their
# administration: retention keeps a window of events but never prunes past any consumer's
# fence; `retire` deletes a consumer (and its fence); a restore publishes a new history
# incarnation; backup and restore "preserve consumer state but publish a new history
# incarnation"; and "a durable consumer is identified by the complete tuple of reactive module
# hash, operation name, canonical typed parameters, and consumer name". The experiments are in
# [`experiments/leases.py`](experiments/leases.py).

# %%
%matplotlib inline
import pandas as pd

import fanoutsim as fs
from fanoutsim import exercises as ex
from fanoutsim import lesson
from fanoutsim.analysis import leases as la
from fanoutsim.plots import leases as lp
from experiments import leases as lx

# %% [markdown]
# ## 1. The retention fence
#
# Retention keeps 60 s of events and runs every 10 s; 2 events/s over 4 partitions for 10
# minutes; `indexer` keeps up. A second consumer, `reporting`, exists from the start but its
# process is down: it has resolved nothing. At t = 300.5 s it is either retired or its client
# starts and it catches up.
#
# > **Predict.** Without `reporting`, the table holds about 60 s of events (120 rows) plus a
# > prune interval. With `reporting` down, how big does it get by t = 300 s?

# %%
lesson.show_source(lx.fence_run)

# %%
fence = {mode: lx.fence_run(mode, at=300.5) for mode in lx.FENCE_MODES}
lesson.table(lx.fence_summary(fence, at=300.5).set_index("run"), highlight=["peak_rows"])

# %%
fig = lp.events_table_size(fence, at=300.5, retention=60.0)
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** A consumer that has resolved nothing allows no pruning at all: the table grows
# with the whole load, to 599 rows at t = 300.5 s (`rows_at_change`: every event since the
# start, 2 a second), against at most 161 without it (`peak_rows`). Retiring it deletes it
# from the fence, and the next prune takes the table back to the retention window; what it
# never read is reported lost with cause `retired` — an operator's decision, which the
# checker names rather than calling it a bug. Resuming it instead delivers everything it
# needed: the fence kept it.
#
# </details>
#
# ## 2. Restore: a new history incarnation
#
# A restore publishes a new incarnation, and RiffDB turns every live lease — even one with
# time left — into a failed attempt, redelivered as the next one. By hand:
#
# > **Predict.** A lease taken before the restore is acked with its token after it. What does
# > the ack return?

# %%
lx.stale_token_demo()

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** `stale_incarnation`: the token belongs to the old incarnation, and a token of an
# older incarnation fails closed, even with time left on its lease. The event comes back as
# its next attempt, whose new token acks.
#
# </details>
#
# In a running system: one consumer (uniform work of 0-6 s, 30 s leases, 4 in flight over 4
# partitions), 1 event/s for 120 s, and a restore at t = 60.25 s while workers are busy.
#
# > **Predict.** How many duplicates does the restore cost, and is anything lost?

# %%
restored = lx.restore_run(at=60.25)
rs = la.restore_summary(restored)
pd.Series({k: v for k, v in rs.items() if k != "partitions"}, name="restore").to_frame()

# %%
fig = lp.lease_outcomes(restored, title="after a restore: in-flight acks fail closed as stale")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Every lease in flight became a failed attempt; the workers' acks were refused as
# `stale_incarnation` (a pre-restore token never acks, even with time left), the events were
# leased again and delivered twice — duplicates with cause `restore` — and every partition
# resumed at the event after its checkpoint. Nothing was lost.
#
# </details>
#
# ## 3. Backup and restore: the tables go back
#
# A backup copies the database's tables inside one transaction; restoring it puts the copy
# back and publishes a new incarnation. `worker` (2 in flight, so it lags a 1 event/s load) is
# backed up at t = 40.25 s and restored at t = 80.25 s; `audit` joins at t = 60 s, between
# the two.
#
# > **Predict.** What happens to the events `worker` acknowledged between the backup and the
# > restore? To the events published in that time? To `audit`?

# %%
br = lx.backup_restore_run()
brs = la.backup_restore_summary(br)
brs

# %%
fig = lp.checkpoint_progress(br, "worker",
                             title="a restore from backup moves every checkpoint back")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** A checkpoint is the seq of the last event resolved in its partition: at the
# restore, `worker`'s went back from `before_restore` to `at_backup`, the step down at
# t = 80.25 s. Acknowledged between backup and restore but in the log at the backup: leased
# and delivered again — `worker`'s 22 duplicates with cause `restore`, its climb from
# t = 80 s to t = 123 s. Published after the backup: gone from the log — of those 40 events
# (seqs 42 to 81), `worker` had leased 4 before the restore and lost the other 36, cause
# `restore`; at about t = 123 s its checkpoints reach that hole and jump across it, from 41 to
# about 83. `audit`,
# created after the backup, does not exist any more (`after_restore` is `None`): the 55 events
# it had not yet resolved are lost, cause `restore`. The run is valid: a restore is an
# operator's decision, and the checker says what it cost.
#
# </details>
#
# ## 4. Consumer identity: a module change makes a new consumer
#
# `indexer` of `TicketEvents` runs under module v1; at t = 200.5 s module v2 is deployed: a new
# durable consumer takes over from the end of the log, and nobody pulls the v1 identity any
# more. Retention keeps 60 s. In one run v1 is forgotten; in the other an operator retires it
# at t = 400.5 s.
#
# > **Predict.** What does the forgotten v1 identity cost?

# %%
ids = {mode: lx.identity_run(mode) for mode in lx.IDENTITY_MODES}
lesson.table(lx.identity_summary(ids).set_index(["run", "module"]), index=True,
             digits={"lowest_checkpoint": 0})  # a seq: a whole number

# %%
fig = lp.identity_log_growth(ids, deploy_at=200.5, retire_at=400.5, retention=60.0)
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The v1 identity was not rebound to the new module: its checkpoint stayed where the
# deploy left it, and so did its fence — the events table grew with the whole load for as long
# as v1 existed. (It starts to grow one retention window after the deploy, not at it: until
# then every event older than 60 s was one v1 had resolved, and retention pruned it as
# before.) A deploy that changes a module hash is two steps for an operator: start the
# new consumer, then retire the old identity once nothing needs it.
#
# </details>
#
# ## Exercises
#
# ### Exercise 11.1 — a stale token, by hand
#
# Write `after_restore()`: a `fs.LeaseSimulation(seed=0)`, a consumer `c` registered with
# `client=False` (you drive it), one event published (`sim.publish("p0", "ticket.changed",
# {"ticket": 7})`), one lease taken (`(lease,) = sim.consume("c")`), then `sim.restore()`;
# return the pair (what `sim.ack("c", event_id, lease.token, lease.incarnation)` returns, the
# `attempt` of the lease you get from a second `sim.consume("c")`).

# %%
def after_restore():
    ...  # your code here


ex.check("11.1", after_restore)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex


def after_restore():
    sim = fs.LeaseSimulation(seed=0)
    sim.register_consumer("c", client=False)
    event_id = sim.publish("p0", "ticket.changed", {"ticket": 7})
    (lease,) = sim.consume("c")
    sim.restore()
    result = sim.ack("c", event_id, lease.token, lease.incarnation)
    (again,) = sim.consume("c")
    return result, again.attempt


ex.check("11.1", after_restore)

# %% [markdown]
# ### Exercise 11.2 — what holds the fence
#
# Write `pruned(idle_consumer, seed)`: a `fs.LeaseSimulation` of that `seed` with
# `LeaseConfig(retention=60.0, retention_interval=10.0)` (from `fanoutsim.designs.leases`), a
# consumer `indexer` (`duration=0.01`), and — when `idle_consumer` — a second one registered
# with `client=False` that never consumes; 2 events/s over 4 partitions for 300 s; return how
# many events retention pruned (rows of kind `pruned` in `sim.trace()`).

# %%
def pruned(idle_consumer, seed):
    ...  # your code here


ex.check("11.2", pruned)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex
from fanoutsim.designs.leases import LeaseConfig


def pruned(idle_consumer, seed):
    sim = fs.LeaseSimulation(LeaseConfig(retention=60.0, retention_interval=10.0), seed=seed)
    sim.register_consumer("indexer", duration=0.01)
    if idle_consumer:
        sim.register_consumer("idle", client=False)
    sim.add_workload(2.0, partitions=4, stop=300.0)
    sim.run(until=300.0)
    return int((sim.trace()["kind"] == "pruned").sum())


ex.check("11.2", pruned)

# %% [markdown]
# ## What to take away

# %% hidden
f = lx.fence_summary(fence, at=300.5).set_index("run")
stalled = f.loc["stalled, then retired"]
lesson.takeaway(
    f"A consumer that has resolved nothing holds all history: the table grew to "
    f"{stalled['rows_at_change']} rows by t = 300 s, against "
    f"{f.loc['no stalled consumer', 'peak_rows']} at most without it; retiring it let the next "
    "prune take it back.",
    f"A restore fails closed: {rs['leases_voided']} leases in flight became failed attempts, "
    f"their acks were refused ({rs['acks_refused']}), {rs['duplicates']} duplicates with cause "
    f"`restore`, {rs['lost']} lost.",
    f"A restore from backup moves checkpoints back (duplicates) and drops what was published "
    f"since ({brs.attrs['published_between']} events): the checker names both `restore`.",
    "A module change makes a new durable consumer; the old identity keeps its fence until an "
    "operator retires it.",
)
