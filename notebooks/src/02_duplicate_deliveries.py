# %% [markdown]
# # 2 · Duplicate deliveries
#
# **What you will learn**
# - why delivery is *at-least-once*: which crash, at which point of the poll loop, makes a
#   subscriber get a firing twice;
# - how many duplicates a crash costs under each `watermark_commit` mode, and how the batch
#   limit enters;
# - the recipe that makes a duplicate harmless: key the effect on `reactor_firing_id`.
#
# **What you need first:** [0 · A tour](00_tour.ipynb) — the poll loop inserts an execution,
# then moves the watermark past its firing.
#
# **Run All:** about 8 s on two cores.
#
# **The system modelled.** In Cloacina's poll loop the execution insert and the watermark
# update are two commits, and a process can die between any two steps. Nothing here scripts
# a duplicate: a fault plan only says *where* the process dies (a named crash point), and what
# follows, follows from the tables.

# %%
%matplotlib inline
import pandas as pd
from matplotlib.figure import Figure

import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim import exercises as ex
from fanoutsim import lesson
from fanoutsim.faults import CrashAtPoint, FaultPlan

pd.Series(fs.faults.REACTOR_CRASH_POINTS, name="named crash points of the reactor").to_frame()

# %% [markdown]
# ## 1. One crash, one firing's story
#
# The runner dies once, right after dispatching a firing and before its watermark commit, and
# comes back a second later.
#
# > **Predict.** How many executions does that one firing get? (a) 0: the crash lost it;
# > (b) 1; (c) 2.

# %%
plan = FaultPlan([CrashAtPoint("poll.after_dispatch_before_watermark", downtime=1.0)])
sim = fs.Simulation(seed=0, faults=plan)
sid = sim.runner.subscribe_workflow_to_reactor("r", "wf")
sim.run(until=0.5)
fid = sim.fire("r", {"n": 1})
sim.run(until=5)
story = fs.explain(sim, fid, sid, show=False)
story[["time", "kind", "actor", "attempt"]]

# %%
pd.Series({"executions of the firing": len(sim.executions()),
           "the checker's causes of extra deliveries": fs.check(sim).total["duplicates_by_cause"]},
          name="value").to_frame()

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** (c). The first incarnation of the runner (attempt 0) dispatched it and died; the
# second (attempt 1) found the watermark still before the firing, dispatched it again, and
# only then moved the watermark. The checker names the cause from the trace alone: a crash
# between the two dispatches.
#
# </details>
#
# ## 2. Which crash point costs duplicates, under each commit mode
#
# `watermark_commit` chooses which writes share a transaction: `per_firing` (insert, then
# watermark, as shipped), `per_batch` (one watermark commit at the end of each batch) and
# `atomic` (insert and watermark in one transaction). Each run pauses the subscription while
# 10 firings/s arrive (60 s here), so that it then catches up in full batches (limit 20), and
# crashes the runner up to 8 times at one named point, each time down for half a second. The
# experiment is `analysis.crash_run`:

# %%
lesson.show_source(analysis.crash_run)

# %% [markdown]
# > **Predict.** Of the named points above, which cost duplicates under `per_firing`? And
# > under `atomic`?
#
# The control runs every (point, mode) once when its cell runs, then redraws: each dot is an
# execution, at the time it was dispatched against the firing's number; red dots are
# second deliveries, dashed lines the crashes.

# %%
named = [p for p in fs.faults.REACTOR_CRASH_POINTS if p != "prune.mid_delete"]  # prune: lesson 3


def crash_at(point, mode):
    return analysis.crash_run(20, mode, point=point, backlog_s=60.0, after_s=20.0)


def draw_crashes(run, point, mode):
    cost = analysis.duplicates_per_crash(run)
    done = run.executions()
    n = done["context"].map(lambda c: c["n"])          # the firing's number (a counter payload)
    t = (done["dispatched_at"] - pd.Timestamp(run.start_us, unit="us", tz="UTC")).dt.total_seconds()
    again = done.duplicated("reactor_firing_id")
    with plots.style():  # the house style of fanoutsim's figures
        fig = Figure(figsize=(8, 3.6), layout="constrained")
        ax = fig.add_subplot()
        ax.scatter(t[~again], n[~again], s=4, color="0.6", label="first delivery")
        ax.scatter(t[again], n[again], s=14, color="#d62728",
                   label=f"second delivery ({again.sum()})")
        trace = run.trace()
        crashed = (trace.loc[trace["kind"] == "crashed", "t"] - run.start_us) / 1e6
        for i, c in enumerate(crashed):
            ax.axvline(c, color="#d62728", linestyle="--", linewidth=0.8,
                       label=None if i else "crash")
        ax.set_xlim(58, 82)  # the catch-up after the pause, when the batches are full
        ax.set_xlabel("virtual time of the dispatch (s)")
        ax.set_ylabel("firing number")
        ax.set_title(f"{point}, {mode}")
        ax.legend(loc="upper left")
    summary = (f"{cost['crashes']} crashes, {cost['extra_deliveries']} duplicates "
               f"({cost['duplicates_per_crash']:.2f} per crash), {cost['lost']} lost, "
               f"{cost['never_logged']} never logged, {cost['requeued']} claims requeued")
    return summary, fig


control = lesson.Explorer(crash_at, draw_crashes,
                          {"point": named, "mode": list(analysis.CRASH_MODES)},
                          value={"point": "poll.after_dispatch_before_watermark",
                                 "mode": "per_batch"},
                          action="choose a crash point and a commit mode")
control

# %% [markdown]
# The whole grid as one table: duplicates per crash under each mode ("–": that mode never
# passes the point, so it never crashed there) and the other damage, the most over the three
# modes: `requeued` counts claims a dead runner left `running` that the next incarnation put
# back to pending; `never_logged`, firings the in-process graphs saw but the log never got;
# `lost`, firings no subscriber will ever get.

# %%
rows = [{"point": p, "watermark_commit": m, **analysis.duplicates_per_crash(run)}
        for (p, m), run in control.results.items()]
points = pd.DataFrame(rows)
crash_table = points.pivot(index="point", columns="watermark_commit", values="duplicates_per_crash")
damage = points.groupby("point")[["crashes", "requeued", "stuck", "never_logged", "lost"]].max()
lesson.table(crash_table[list(analysis.CRASH_MODES)].join(damage).reindex(named), digits=2,
             highlight=list(analysis.CRASH_MODES))

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Duplicates come from one window: after an execution insert commits and before the
# watermark passes its firing. Under `per_firing` that is `poll.after_dispatch_before_watermark`
# (one duplicate a crash). Under `per_batch` the window is the whole batch, up to its one
# watermark commit: a crash mid-batch re-delivers what the batch dispatched so far, and one at
# `poll.before_batch_commit` all of it (the 20 of a full batch). Under `atomic` there is no
# window. A crash after the fetch or after a claim re-delivers nothing (a claim left `running`
# is requeued and runs once). A crash before the log write does the opposite damage: the
# in-process graphs saw firings the log never got (`never_logged`), so no subscriber gets
# them. The checker does not count them as `lost`: a firing the log never committed was never
# promised to anyone.
#
# </details>
#
# ## 3. Duplicates per crash against the batch limit
#
# Now only the costly point, over the batch limit L. Each crash lands at a uniformly random
# position of a full batch (crashes are spaced L to 2L dispatches apart, seeded).
#
# > **Predict.** Under `per_batch`, how many duplicates does one crash cost at L = 50?
# > (a) 1; (b) about 25; (c) 50. And under `per_firing`?

# %%
sweep = analysis.crash_sweep((1, 2, 5, 10, 20, 50, 100))
by_limit = sweep.pivot(index="batch_limit", columns="watermark_commit",
                       values="duplicates_per_crash")
lesson.table(by_limit[list(analysis.CRASH_MODES)], digits=2)

# %%
fig = plots.duplicates_per_crash(sweep)
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** (b): under `per_batch` everything dispatched so far in the batch is re-delivered,
# (L + 1) / 2 on average; `per_firing` re-delivers exactly the firing in flight, 1 per crash
# at every L; `atomic` nothing. No run lost a firing.
#
# </details>
#
# ## 4. The idempotency recipe: key the effect on `reactor_firing_id`
#
# The dispatched context carries `reactor_firing_id` for exactly this: a workflow with an
# external effect writes it to *the same logical record* for the same firing (an UPSERT keyed
# on the firing id). One workflow body writes every run to two external tables — a naive one
# that appends, and one that upserts on `reactor_firing_id` — in one run under the worst
# mode above (`per_batch`, batch limit 50, 8 crashes).

# %%
run, naive, upsert = analysis.idempotency_run(batch_limit=50, watermark_commit="per_batch")
dedup = analysis.dedup_report(run, naive, upsert)
pd.Series(dedup, name="count").to_frame()

# %% [markdown]
# `atomic` closes the crash window.
#
# > **Predict.** Two poller replicas read the same subscription under `atomic`. Duplicates?
# > (a) none: atomic closed the window; (b) many.

# %%
pollers = fs.Simulation(config=fs.SchedulerConfig(watermark_commit="atomic"), seed=0,
                        faults=FaultPlan([fs.faults.Pollers(2)]))
pollers.runner.subscribe_workflow_to_reactor("r", "wf")
pollers.add_workload("r", 2.0, payload="counter")
pollers.run(until=120)
two_pollers = fs.check(pollers).total
pd.Series({"firings": two_pollers["expected"], "extra deliveries": two_pollers["extra_deliveries"],
           "causes": two_pollers["duplicates_by_cause"]}, name="atomic, 2 pollers").to_frame()

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** (b): both replicas read the same batch and both dispatch it, whatever the commit
# mode ([lesson 5](05_watermark_holes.ipynb) shows the watermark they fight over). `atomic`
# closes the crash window, but not every source of duplicates.
#
# </details>
#
# ## Exercises
#
# ### Exercise 2.1 — duplicates per crash, by mode
#
# Write `per_crash(mode, batch_limit)`: one `analysis.crash_run` with that batch limit under
# `watermark_commit=mode` (crashes at the costly point), and return the duplicates per crash
# (`analysis.duplicates_per_crash(sim)`). The checker asks for each of the three modes, at
# batch limits of its own.

# %%
def per_crash(mode, batch_limit):
    ...  # your code here


ex.check("2.1", per_crash)

# %% solution
from fanoutsim import analysis
from fanoutsim import exercises as ex


def per_crash(mode, batch_limit):
    sim = analysis.crash_run(batch_limit, mode)
    return analysis.duplicates_per_crash(sim)["duplicates_per_crash"]


ex.check("2.1", per_crash)

# %% [markdown]
# ### Exercise 2.2 — an idempotent effect
#
# Write `write(table, context)`, a workflow body's effect: record the execution's `context`
# (a dict) in the dict `table` so that a re-delivered firing leaves one record, not two. The
# checker runs it as the body of a crash run under `per_batch` and counts the records.

# %%
def write(table, context):
    ...  # your code here


ex.check("2.2", write)

# %% solution
from fanoutsim import exercises as ex


def write(table, context):
    table[context["reactor_firing_id"]] = dict(context)   # an UPSERT on the firing's id


ex.check("2.2", write)

# %% [markdown]
# ## What to take away

# %% hidden
costly = crash_table.loc["poll.after_dispatch_before_watermark"]
lesson.takeaway(
    f"One window costs duplicates: a crash after an execution insert commits and before the "
    f"watermark passes it ({costly['per_firing']:.1f} per crash under `per_firing`); crashing "
    "after the fetch or after the claim re-delivers nothing.",
    f"How many is the commit mode: `per_batch` re-delivers the batch so far — "
    f"{by_limit.loc[50, 'per_batch']:.1f} per crash at L = 50, about (L + 1) / 2 — and "
    f"`atomic` {by_limit.loc[50, 'atomic']:.0f}.",
    f"The recipe works: {dedup['executions']:,} executions of {dedup['firings']:,} firings "
    f"left {dedup['naive_records']:,} records in the naive table and "
    f"{dedup['upserted_records']:,} in the one keyed on `reactor_firing_id`.",
    f"Make the workflow idempotent anyway: two pollers under `atomic` delivered "
    f"{two_pollers['extra_deliveries']} firings twice.",
)
