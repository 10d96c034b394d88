# %% [markdown]
# # 8 · Outbox: lost hints and the safety poll
#
# **What you will learn**
# - what a lost notification (a *hint*) costs, when the *safety poll* and a per-consumer
#   *cursor* are the truth;
# - the shape of that cost, and what sets its worst case;
# - what the per-consumer guardrails — a timeout, a retry budget with parking, one cursor each —
#   do when one step, row or consumer goes bad.
#
# **What you need first:** [0 · A tour](00_tour.ipynb) (a durable log read past a position)
# and [1 · Latency budget](01_latency_budget.ipynb) (the wait for the next poll).
#
# **Run All:** about 4 s on two cores.
#
# **The system modelled.** Subspace, a product whose every change of durable state appends a
# row to an outbox table in the same transaction, then sends `NOTIFY` with just the row's
# sequence number. One dispatcher wakes on that hint, or on its periodic safety poll, and for
# each *consumer* reads **every** row past the consumer's cursor, in order; the cursor moves
# only after a row is durably handled. Postgres may drop or coalesce notifications, so the
# hint is only a hint.
#
# The experiments are functions in [`experiments/outbox.py`](experiments/outbox.py), beside
# this notebook: read them, copy them, change them.

# %%
%matplotlib inline
import pandas as pd
from matplotlib.figure import Figure

import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim import exercises as ex
from fanoutsim import lesson
from fanoutsim.analysis import outbox as oa
from experiments import outbox as ox

# %% [markdown]
# ## 1. A lost hint
#
# One consumer, 10 ms a row; a commit every 5 s on average for one virtual hour; a share of
# the hints dropped; a safety poll every P seconds. The experiment:

# %%
lesson.show_source(ox.latency_run)

# %% [markdown]
# > **Predict.** Every hint is lost and the safety poll runs every 5 s. (1) How many rows are
# > lost? (2) What is the worst commit → handled latency? (3) What does the histogram of the
# > latencies look like: a bell around 5 s, or something else?
#
# The control ran every (share dropped, poll interval) of its grid once, so it only redraws.

# %%
DROPS, POLLS = [0.0, 0.05, 0.2, 0.5, 1.0], [1.0, 5.0, 15.0]


def lost_hints(drop, poll):
    sim = ox.latency_run(drop, poll)
    return {"latency": oa.latency_frame(sim), "report": fs.check_outbox(sim)}


def draw_lost_hints(result, drop, poll):
    lat, total = result["latency"], result["report"].total
    with plots.style():
        fig = Figure(figsize=(8, 3.8), layout="constrained")
        plots.outbox_latency_histogram(lat.assign(drop=drop, poll=poll), poll=poll,
                                       ax=fig.add_subplot())
    summary = (f"{drop:.0%} of hints dropped, safety poll every {poll:g} s: "
               f"{total['delivered']} of {total['committed']} rows handled, {total['lost']} lost; "
               f"p50 {lat['latency_s'].median():.3f} s, worst {lat['latency_s'].max():.3f} s")
    return summary, fig


control = lesson.Explorer(lost_hints, draw_lost_hints, {"drop": DROPS, "poll": POLLS},
                          value={"drop": 1.0, "poll": 5.0},
                          action="choose the share of hints dropped and the safety poll")
control

# %%
rows = []
for (drop, poll), r in control.results.items():
    x = r["latency"]["latency_s"]
    rows.append({"poll (s)": poll, "dropped": drop, "committed": r["report"].total["committed"],
                 "lost": r["report"].total["lost"], "hinted": r["latency"]["hinted"].mean(),
                 "p50 (s)": x.median(), "p99 (s)": x.quantile(0.99), "worst (s)": x.max(),
                 "worst / poll": x.max() / poll})
summary = pd.DataFrame(rows).set_index(["poll (s)", "dropped"])
lesson.table(summary, digits={"hinted": 1}, percent=["dropped", "hinted"],
             highlight=["worst / poll"])

# %%
fig = plots.outbox_tail_vs_drop(summary.reset_index().rename(
    columns={"poll (s)": "poll", "dropped": "drop", "p99 (s)": "p99_s", "worst (s)": "max_s"}))
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** (1) None: every run handled every row — the cursor, not the hint, decides what is
# read. (2) One poll interval plus the step: a row whose hint is lost waits for the next
# safety poll. (3) A plateau that ends in a wall: the poll runs on its own beat, unrelated to
# when the commit happened, so the wait is spread evenly over [0, P). Set the interval to the
# worst latency you can accept when hints are lost, and expect half of it. The share dropped
# sets how many rows pay that, not how much.
#
# </details>
#
# ## 2. A hung step, with and without a timeout
#
# Two consumers see the same fault: their 10th step hangs for 300 s (a network call that never
# returns). `guarded` runs each step under a 5 s timeout with a 1 s backoff; `unguarded` has
# no timeout. One row a second for a minute.
#
# > **Predict.** How long does the row after the hung one wait under each consumer?

# %%
hung = ox.hung_run(hang=300.0, timeout=5.0, at_row=10, rows=60)
lesson.table(analysis.scenario_summary(hung).set_index("consumer"), digits=3)

# %%
fig = plots.cursor_progress(hung, title="a step hangs for 300 s at row 10")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** With the timeout, the hung row failed once, was retried after the backoff and
# handled; the cursor lost a few seconds. Without it the consumer sat on that row for the
# whole 300 s and every later row waited behind it. Neither lost a row.
#
# </details>
#
# ## 3. A poison row
#
# `triage` raises on the row whose ref is `poison` (the 21st), every time; `indexer` does not
# care about it. Triage's retry budget is 5, backoff 0.5 s doubling with jitter.
#
# > **Predict.** Does triage ever handle row 22? Does `indexer` notice anything?

# %%
poison = ox.poison_run(rows=60, poison_at=20, retry_budget=5)
lesson.table(analysis.scenario_summary(poison).set_index("consumer"), digits=3)

# %%
poison.parked()[["consumer", "seq", "error", "attempts"]]

# %%
fig = plots.cursor_progress(poison, title="a poison row at seq 21")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** After its retry budget triage *parked* the row with its error and moved on;
# every later row was handled, and `indexer` never noticed. Parking is per consumer and in
# order: triage's own later rows waited during those retries.
#
# </details>
#
# ## 4. A slow consumer beside a fast one, and a late one back-filling
#
# 1.5 commits/s for two minutes; `fast` takes 10 ms a row, `slow` a full second (it can handle
# only one row a second).
#
# > **Predict.** Does `slow` hold up `fast`?

# %%
slow = ox.slow_fast_run(rate=1.5, seconds=120.0, slow=1.0)
fig = plots.cursor_progress(slow, lag=True, title="rows behind the head: slow and fast")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** No: each consumer has its own loop and its own cursor. `fast` never fell more than
# a row behind while `slow` built a backlog and drained it after the writers stopped.
#
# </details>
#
# The same cursors let a consumer added late read the retained log from the beginning:
# `search` registers at t = 600 s with its cursor at the start, and costs 50 ms a row.

# %%
backfill = ox.backfill_run(rate=0.5, join_at=600.0, seconds=900.0, row_cost=0.05)
caught_up = analysis.caught_up_at(backfill, "search", after=600.0)
fig = plots.cursor_progress(backfill, title="search registers at t = 600 s, cursor at the start")
fig

# %% [markdown]
# ## Exercises
#
# ### Exercise 8.1 — the worst wait
#
# Write `worst_wait(poll)`: an `fs.OutboxSimulation` with `seed=0` and
# `OutboxConfig(safety_poll_interval=poll)` and every hint dropped
# (`faults=FaultPlan([Notifications(drop=1.0)])`), one consumer taking 0.01 s a row, 0.2
# commits/s for 600 s; return the worst commit → handled latency
# (`oa.handled_latency(sim)["latency_s"].max()`). The imports are in the solution.

# %%
def worst_wait(poll):
    ...  # your code here


ex.check("8.1", worst_wait)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex
from fanoutsim.analysis import outbox as oa
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.faults import FaultPlan, Notifications


def worst_wait(poll):
    sim = fs.OutboxSimulation(OutboxConfig(safety_poll_interval=poll), seed=0,
                              faults=FaultPlan([Notifications(drop=1.0)]))
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(0.2, stop=600)
    sim.run(until=600 + poll + 1)
    return float(oa.handled_latency(sim)["latency_s"].max())


ex.check("8.1", worst_wait)

# %% [markdown]
# ### Exercise 8.2 — what a poison row costs the rows behind it
#
# Write `held_up(budget)`: an `fs.OutboxSimulation(seed=0)` with one consumer, `triage`, whose
# handler raises on every row whose `ref` is `"poison"` (`register_consumer("triage", fn,
# retry_budget=budget, backoff=0.5)`); commit `"poison"`, then a healthy row `"p1"`
# (`sim.commit` returns its seq), and run 120 virtual seconds. Return how long `p1` waited: its
# commit → handled latency, from `oa.handled_latency(sim)`. Between attempts the consumer backs
# off 0.5 s, then 1 s, 2 s, …, each wait shortened by a random jitter: run it, do not add it up.

# %%
def held_up(budget):
    ...  # your code here


ex.check("8.2", held_up)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex
from fanoutsim.analysis import outbox as oa


def held_up(budget):
    def triage(row):
        if row["ref"] == "poison":
            raise ValueError("cannot parse")

    sim = fs.OutboxSimulation(seed=0)
    sim.register_consumer("triage", triage, retry_budget=budget, backoff=0.5)
    sim.commit("poison")
    behind = sim.commit("p1")
    sim.run(until=120)
    lat = oa.handled_latency(sim)
    return float(lat.loc[lat["seq"] == behind, "latency_s"].iloc[0])


ex.check("8.2", held_up)

# %% [markdown]
# [Lesson 9](09_outbox_derived_state.ipynb) goes on with the outbox: what at-least-once does
# to derived state, the reserved LISTEN connection, and the same dispatcher on the wall clock.

# %% [markdown]
# ## What to take away

# %% hidden
every = summary.xs(1.0, level="dropped")
hung_s = analysis.scenario_summary(hung).set_index("consumer")
lesson.takeaway(
    f"A lost hint costs latency, never a row: {int(summary['lost'].sum())} rows lost over "
    f"{len(summary)} runs from 0% to 100% of hints dropped.",
    f"The cost is bounded by the safety poll and spread evenly under it: with every hint lost "
    f"the worst wait was {every.loc[5.0, 'worst / poll']:.2f} of a 5 s interval, the median "
    f"{every.loc[5.0, 'p50 (s)']:.2f} s.",
    f"A timeout rescues a hung step: worst latency {hung_s.loc['guarded', 'latency_max_s']:.1f} s "
    f"with a 5 s timeout, {hung_s.loc['unguarded', 'latency_max_s']:.0f} s without.",
    f"A poison row is parked after its retry budget ({len(poison.parked())} parked, the rest "
    "handled), and consumers never hold each other up: one cursor each.",
    f"A consumer added late back-fills from its own cursor: `search` registered at t = 600 s, "
    f"its cursor at the start of the log, and caught up {caught_up - 600:.0f} s later "
    f"(t = {caught_up:.0f} s).",
)
