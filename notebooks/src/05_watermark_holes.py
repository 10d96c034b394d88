# %% [markdown]
# # 5 · Watermark holes
#
# **What you will learn**
# - four ordinary situations that put a timestamp watermark to the test — ties split by the
#   batch limit, late commits, clock skew, several pollers — and what each costs;
# - how to read a run on a timeline: when each firing became visible, against where the
#   watermark stood;
# - what each fix (`fired_at_id`, `settled`) closes, and what it costs in latency.
#
# **What you need first:** [0 · A tour](00_tour.ipynb) (the watermark) and
# [2 · Duplicate deliveries](02_duplicate_deliveries.ipynb) (the checker names causes).
#
# **Run All:** about 5 s on two cores.
#
# **The system modelled.** As shipped, a Cloacina subscription reads
# `fired_at > last_seen_fired_at` and moves its watermark to the `fired_at` of the last
# firing it handled. That strict `>` on a timestamp assumes that no firing will ever *appear*
# at or below a watermark that has passed it. Each hole below is a minimal seeded fault plan,
# found by the delivery checker with its cause and drawn on a timeline: each firing is a
# point at (when its row became visible, its `fired_at`), the watermark is the step line, and
# a firing that becomes visible on or below the line is lost.

# %%
%matplotlib inline
import pandas as pd

import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim import exercises as ex
from fanoutsim import lesson

pd.DataFrame([{"hole": hole, "faults": ", ".join(f.kind for f in spec["faults"]),
               "firings/s": spec["rate"], "config": str(spec["config"] or "defaults")}
              for hole, spec in analysis.HOLES.items()]).set_index("hole")

# %% [markdown]
# ## 1. Two firings with one timestamp, split by the batch limit
#
# Writers stamp bursts of two firings with the same microsecond; the batch limit is 1.
#
# > **Predict.** The first firing of a pair moves the watermark to the pair's `fired_at`.
# > What happens to its twin at the next poll?

# %%
def hole_table(sim, report):
    return pd.Series(analysis.hole_summary(sim, report), name="value").to_frame()


ties = analysis.hole_run("tie split by the batch limit")
report = fs.check(ties)
hole_table(ties, report)

# %%
fig = plots.firing_timeline(ties, report=report, title="Ties split by the batch limit (limit 1)")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The next poll asks for `fired_at >` the twins' stamp: the twin is skipped. Each
# lost firing (a cross) sits inside a delivered one's circle: same stamp, same commit.
#
# </details>
#
# ## 2. A late commit
#
# 30% of writers stamp `fired_at` when they start and commit 0.5-3 s later. Meanwhile the poll
# loop reads the firings committed after them and moves the watermark past their stamp.
#
# > **Predict.** Lost, or delivered late?

# %%
late = analysis.hole_run("late commit")
report = fs.check(late)
hole_table(late, report)

# %%
fig = plots.firing_timeline(late, report=report, title="Late commits (30%, 0.5-3 s)")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Lost, with cause `late_visibility`: when they become visible, they are already
# behind the watermark.
#
# </details>
#
# ## 3. Clock skew
#
# Two reactor hosts, one with a clock 2 s behind. Its firings are visible at once but stamped
# 2 s in the past, below a watermark the other host's firings have already moved.
#
# > **Predict.** The skewed host's firings: delivered late, lost, or delivered twice?

# %%
skew = analysis.hole_run("clock skew")
report = fs.check(skew)
fig = plots.firing_timeline(skew, report=report, title="Clock skew (one host 2 s behind)")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Lost, for good: each lands below a watermark the other host's firings have already
# moved past, and no poll reads below its watermark again. The checker names the cause
# `late_visibility`: to a poller, a firing stamped in the past is one that became visible
# late, so it cannot tell clock skew from a late commit — and the fix is the same.
#
# </details>
#
# ## 4. Several pollers
#
# Two runner replicas poll the same store. Both read the same batch and both dispatch it; the
# second one's watermark update drags the watermark back behind the first one's.
#
# > **Predict.** Lost firings, duplicates, or both?

# %%
pollers = analysis.hole_run("several pollers")
report = fs.check(pollers)
fig = plots.firing_timeline(pollers, report=report, window=(0.0, 12.0),
                            title="Two pollers on one store")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Duplicates, nearly one per firing, and nothing lost: both replicas dispatch every
# batch they read (cause `several_pollers`). A watermark dragged back makes a replica read
# again what was dispatched already; it never skips a firing.
#
# </details>
#
# ## 5. Closing the holes
#
# Two strategies (`SchedulerConfig(watermark=...)`):
#
# - `"fired_at_id"`: a compound cursor `(fired_at, id) > (last_seen_fired_at,
#   last_seen_firing_id)`, so twins sharing a timestamp are ordered by id;
# - `"settled"`: the same compound cursor, reading only firings at least `watermark_settle`
#   (here 5 s) old, so that anything visible within 5 s of its stamp is still ahead.
#
# > **Predict.** Which holes does `fired_at_id` close? Which does `settled` close?

# %%
matrix = analysis.hole_matrix()
lost = matrix.pivot(index="hole", columns="watermark", values="lost")
lesson.table(lost, highlight=list(lost.columns))

# %%
fig = plots.hole_losses(matrix)
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** `fired_at_id` closes the ties and only the ties: a firing that becomes visible
# below the cursor is below it whatever the tie-break. `settled` closes all three — as long as
# visibility comes within its horizon.
#
# </details>
#
# A settle horizon shorter than the late commits' delay, 1 s against 0.5-3 s:

# %%
short = analysis.hole_summary(analysis.hole_run("late commit", "settled", settle=1.0))
pd.Series({"lost": short["lost"], "causes": short["lost_by_cause"]},
          name="late commit, settled with a 1 s horizon").to_frame()

# %% [markdown]
# ## 6. What each strategy costs
#
# The same healthy run (2 firings/s, no fault) under each strategy.
#
# > **Predict.** The compound cursor, and a 5 s settle: what does each add to fire → dispatch?

# %%
cost = analysis.hole_matrix(["none"]).set_index("watermark")
lesson.table(cost[["lost", "dispatch_mean_s", "dispatch_p99_s"]], digits=3)

# %%
fig = plots.strategy_latency(cost.reset_index())
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The compound cursor is free; `settled` costs exactly its horizon.
#
# </details>
#
# ## Exercises
#
# ### Exercise 5.1 — make a tie yourself
#
# Write `twins_lost(watermark, pairs)`: a `fs.Simulation` with `reactor_poll_batch_limit=1`
# and that `watermark`; one subscription to `r`; at t = 0.5, 1.5, 2.5, … s (`pairs` times, up
# to 4) fire two firings at the same instant (two `sim.fire` calls without running the clock
# between them); run to 10 s and return how many firings the checker (`fs.check(sim)`) finds
# lost.

# %%
def twins_lost(watermark, pairs):
    ...  # your code here


ex.check("5.1", twins_lost)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex


def twins_lost(watermark, pairs):
    config = fs.SchedulerConfig(reactor_poll_batch_limit=1, watermark=watermark)
    sim = fs.Simulation(config=config, seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    for k in range(pairs):
        sim.run(until=k + 0.5)
        sim.fire("r", {"n": 1})
        sim.fire("r", {"n": 2})
    sim.run(until=10)
    return fs.check(sim).total["lost"]


ex.check("5.1", twins_lost)

# %% [markdown]
# ### Exercise 5.2 — the smallest settle time
#
# The late commits of section 2 arrive up to 3 s after their stamp. What is the smallest
# `watermark_settle`, in whole seconds, that loses nothing? Try
# `analysis.hole_run("late commit", "settled", settle=s)` for a few `s`, then answer a number.

# %%
smallest_settle = ...  # a number of seconds

ex.check("5.2", smallest_settle)

# %% solution
from fanoutsim import analysis
from fanoutsim import exercises as ex

smallest_settle = next(s for s in range(1, 10) if analysis.hole_summary(
    analysis.hole_run("late commit", "settled", settle=float(s)))["lost"] == 0)
ex.check("5.2", smallest_settle)

# %% [markdown]
# ## What to take away

# %% hidden
m = matrix.set_index(["hole", "watermark"])
healthy = cost["dispatch_mean_s"]
lesson.takeaway(
    f"The strict `>` on a timestamp loses firings without any crash: "
    f"{m.loc[('tie split by the batch limit', 'fired_at'), 'lost']} to ties, "
    f"{m.loc[('late commit', 'fired_at'), 'lost']} to late commits and "
    f"{m.loc[('clock skew', 'fired_at'), 'lost']} to a clock 2 s behind, each named by the "
    "checker.",
    f"`fired_at_id` closes the ties only (0 lost there, still "
    f"{m.loc[('late commit', 'fired_at_id'), 'lost']} late commits lost).",
    f"`settled` closes all three while visibility comes within its horizon: a 1 s horizon lost "
    f"{short['lost']} of the 0.5-3 s late commits; choose it above the longest delay you expect.",
    f"Its price is the horizon: fire → dispatch {healthy['fired_at']:.3f} s under `fired_at`, "
    f"{healthy['settled']:.3f} s under `settled` (5 s).",
    "Several pollers are not a watermark problem: they duplicate; the cure is one poller per "
    "subscription and idempotent workflows.",
)
