# %% [markdown]
# # 6 · Poll-interval sweep
#
# **What you will learn**
# - to run one scenario over a grid of settings and seeds with `fs.sweep`, and read the table;
# - what the poll interval P and the batch limit do to latency while a subscription keeps
#   up, and to the database's load;
# - where the *knee* is — the firing rate at which a subscription stops keeping up — and how
#   to pick P and the batch limit for a latency budget.
#
# **What you need first:** [1 · Latency budget](01_latency_budget.ipynb): the poll wait and
# the batch limit.
#
# **Run All:** about 15 s on two cores.
#
# **The system modelled.** Cloacina's poll loop, the same as in lesson 1. A short interval
# means low latency and many queries; a long one, few queries and slow delivery; and a
# subscription drains at most B firings per poll, so above some rate it cannot keep up at all.

# %%
%matplotlib inline
import pandas as pd
from IPython.display import clear_output

import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim import examples
from fanoutsim import exercises as ex
from fanoutsim import lesson
from fanoutsim.scenario import load_scenario
from fanoutsim.widgets import sweep_explorer

P, B = "reactor_poll_interval", "reactor_poll_batch_limit"
scenario = load_scenario(examples.path("sweep"))  # a scenario that ships with fanoutsim
n_subs = len(scenario.subscriptions)

# %% [markdown]
# ## 1. The sweep
#
# 6 poll intervals × 3 batch limits × 3 seeds: 54 runs of 300 virtual seconds on two worker
# processes; the bar counts them. One row per run: the settings, the seed, the measurements.

# %% ignore-output
df = fs.sweep(scenario, grid={P: [0.1, 0.25, 0.5, 1.0, 2.0, 5.0], B: [1, 10, 100]},
              seeds=range(3), until=300, workers=2, cache=None, progress=True)
clear_output()  # the bar has done its job: the saved lesson keeps no stale bar

# %%
pd.Series({"runs": len(df), "poll intervals": df[P].nunique(), "batch limits": df[B].nunique(),
           "seeds": df["seed"].nunique(), "subscriptions": n_subs,
           "firings per second": sum(w.rate for w in scenario.workloads),
           "every run valid": bool(df["valid"].all()), "lost": int(df["lost"].sum())},
          name="the sweep").to_frame()

# %%
df.drop(columns="wall_s").head(3).T  # one column per run: the measurements read down

# %% [markdown]
# (`wall_s`, each run's own wall time, is left out of what we show, so that the saved lesson
# does not change from one run to the next.)
#
# ## 2. Latency against the poll interval
#
# > **Predict.** With the batch limit at 100 (never reached), what are p50 and p99 of fire →
# > dispatch at P = 2 s? And with a batch limit of 1 — a drain of 1/P firings a second,
# > against the busiest stream's 1.5 firings a second?

# %%
fig = plots.latency_vs_interval(df)
fig

# %%
lat = analysis.seed_summary(df, [B, P], ["fire_to_dispatch_p50_s", "fire_to_dispatch_p99_s",
                                         "backlog"])
lat = lat.set_index([B, P])[["fire_to_dispatch_p50_s", "fire_to_dispatch_p99_s", "backlog"]]
lesson.table(lat, digits=3)

# %% [markdown]
# In the figure, points are means over the three seeds, shaded from the lowest seed to the
# highest (with three seeds a 95% interval would mostly show Student's t, 4.3); the dotted and
# dash-dotted lines are the theory of a uniform poll wait.
#
# <details><summary>Show the answer</summary>
#
# **Read.** With B = 100 the latency *is* the poll wait: p50 ≈ P/2, p99 ≈ P. B = 10 follows
# it up to P = 2 s; at P = 5 s a poll brings 7.5 acme firings on average against a limit of
# 10, so bursts spill into the next poll. With B = 1 the drain rate is 1/P against acme's 1.5
# firings/s: from P = 1 s on, the backlog grows — and the latency, measured only over what
# *was* dispatched, understates the damage.
#
# </details>
#
# ## 3. The database load
#
# > **Predict.** Four subscriptions. How many poll queries per second at P = 0.1 s? Does the
# > batch limit change it?

# %%
fig = plots.polls_vs_interval(df, subscriptions=n_subs)
fig

# %%
load = df.groupby([P, B])["polls_per_s"].mean().unstack(B)
lesson.table(load.rename(columns=lambda b: f"batch {b}: queries/s"), digits=2)

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The poll loop queries once per subscription per pass, whatever the traffic: the
# load is `subscriptions / P`, the same for every batch limit.
# Halving the latency doubles the queries.
#
# </details>
#
# ## 4. The knee: backlog against the firing rate
#
# A subscription drains at most B / P firings per second. When its stream fires faster, the
# backlog grows by the difference every second, without bound. Tenant acme gets 75% of the
# total rate, so its subscriptions hit the limit first, at a total rate of (B / P) / 0.75 —
# the *knee*. We sweep the total rate (grid key `rate` scales every workload, keeping the
# split) at P = 1 s for two batch limits: 24 runs.
#
# > **Predict.** With B = 5 at P = 1 s, at what total rate does the backlog start to grow?

# %% ignore-output
rates = fs.sweep(scenario, grid={"rate": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0], B: [5, 10]},
                 seeds=range(2), until=300, workers=2, cache=None, progress=True)
clear_output()

# %%
knees = {b: analysis.knee_rate(scenario, b, 1.0) for b in (5, 10)}
backlog = rates.groupby(["rate", B])["backlog"].mean().unstack(B)
backlog.columns = [f"backlog, batch {b}" for b in backlog.columns]
for b in (5, 10):
    backlog[f"theory, batch {b}"] = [round(analysis.backlog_growth(scenario, r, b, 1.0) * 300)
                                     for r in backlog.index]
lesson.table(backlog, digits=1)

# %%
fig = plots.backlog_vs_rate(rates, knees)
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The knees are at (B / P) / 0.75: 6.67 firings/s for B = 5, 13.33 for B = 10.
# Below its knee a batch limit leaves a few firings behind at the end (those after the last
# poll); above it the backlog after 300 s is close to `300 s × Σ (stream rate − B/P)` and
# never drains. A TTL prune ([lesson 3](03_prune_and_ttl.ipynb)) would then delete
# undelivered firings: the backlog turns into loss.
#
# </details>
#
# ## 5. A recommendation
#
# Pick the cheapest setting (fewest queries per second) that keeps the mean p99 fire →
# dispatch within a budget and keeps up (no seed ends more than 100 firings behind).

# %%
rec = analysis.recommend(df, p99_budget_s=1.5, max_backlog=100)
budgets = []
for budget in (0.3, 0.6, 1.5, 3.0):
    r = analysis.recommend(df, p99_budget_s=budget, max_backlog=100)
    budgets.append({"p99 budget (s)": budget, "P (s)": r[P], "batch limit": r[B],
                    "p99 (s)": r["fire_to_dispatch_p99_s"], "queries/s": r["polls_per_s"],
                    "settings that meet it": r["candidates"]})
lesson.table(pd.DataFrame(budgets).set_index("p99 budget (s)"), digits=3)

# %%
fig = plots.recommendation_chart(df, rec, p99_budget_s=1.5, max_backlog=100)
fig

# %% [markdown]
# ## 6. Explore the sweep
#
# The control redraws from the table above (nothing re-runs): choose the latency, the batch
# limits shown and the p99 budget.

# %%
explorer = sweep_explorer(df, p99_budget_s=1.5, max_backlog=100)
lesson.needs_kernel(explorer, "change the budget and the batch limits shown")

# %% [markdown]
# ## 7. The same sweep on a Dask cluster
#
# Give `fs.sweep` a `dask.distributed.Client` instead of `workers` and each run becomes one
# Dask task on the client's cluster; the table comes back the same, row for row. A
# `LocalCluster` of two single-threaded worker processes re-runs a corner of the sweep (P =
# 0.5 and 1 s, batch 10 and 100, the same three seeds: 12 runs).

# %% ignore-output
from distributed import Client, LocalCluster

corner = {P: [0.5, 1.0], B: [10, 100]}
with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
        Client(cluster) as client:
    client.wait_for_workers(2)
    workers = len(client.run(len, ()))  # one answer per worker
    on_dask = fs.sweep(scenario, grid=corner, seeds=range(3), until=300, client=client,
                       cache=None, progress=False)

# %%
local = df[df[P].isin(corner[P]) & df[B].isin(corner[B])].reset_index(drop=True)
same = on_dask.drop(columns="wall_s").equals(local.drop(columns="wall_s"))
pd.Series({"runs as Dask tasks": len(on_dask), "workers": workers,
           "the same rows as the local sweep": same}, name="Dask").to_frame()

# %% [markdown]
# On a real cluster, start a scheduler and workers (`dask scheduler`, then `dask worker
# tcp://HOST:8786 --nthreads 1` on each machine) with **the same fanoutsim version** installed
# everywhere, and connect: `client = Client("tcp://HOST:8786")`. `fs.sweep` asks every worker
# for its version first and refuses one without fanoutsim or with another version. From a
# shell, `fanoutsim sweep ... --scheduler tcp://HOST:8786` does the same.
#
# ## Exercises
#
# ### Exercise 6.1 — the knee
#
# Write `knee(batch_limit, poll_interval)`: the total firing rate above which the busiest
# subscription of this scenario cannot keep up (acme gets 75% of the traffic). A formula,
# no simulation.

# %%
def knee(batch_limit, poll_interval):
    ...  # your code here


ex.check("6.1", knee)

# %% solution
from fanoutsim import exercises as ex


def knee(batch_limit, poll_interval):
    return batch_limit / poll_interval / 0.75


ex.check("6.1", knee)

# %% [markdown]
# ### Exercise 6.2 — the database load, measured
#
# Write `queries_per_second(subscriptions, poll_interval)`: a `fs.Simulation` with that
# `reactor_poll_interval`, that many subscriptions to `r` (workflows `w0`, `w1`, …), firings
# at 2/s, 60 virtual seconds; return the metric `fanoutsim_reactor_poll_queries_total`
# divided by 60.

# %%
def queries_per_second(subscriptions, poll_interval):
    ...  # your code here


ex.check("6.2", queries_per_second)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex


def queries_per_second(subscriptions, poll_interval):
    sim = fs.Simulation(config=fs.SchedulerConfig(reactor_poll_interval=poll_interval), seed=0)
    for i in range(subscriptions):
        sim.runner.subscribe_workflow_to_reactor("r", f"w{i}")
    sim.add_workload("r", 2.0)
    sim.run(until=60)
    total = sum(v for k, v in sim.metrics().items()
                if k.startswith("fanoutsim_reactor_poll_queries_total"))
    return total / 60


ex.check("6.2", queries_per_second)

# %% [markdown]
# ## What to take away

# %% hidden
p50 = lat.loc[(100, 1.0), "fire_to_dispatch_p50_s"]
p99 = lat.loc[(100, 1.0), "fire_to_dispatch_p99_s"]
q = load.mean(axis=1)
lesson.takeaway(
    f"Latency is the poll wait while the subscription keeps up: p50 {p50:.3f} s and p99 "
    f"{p99:.3f} s at P = 1 s with batch 100 — P/2 and P.",
    f"DB load is subscriptions / P, whatever the traffic or batch limit: {q.loc[0.1]:.0f} "
    f"queries/s at P = 0.1 s, {q.loc[1.0]:.0f} at 1 s, {q.loc[5.0]:.1f} at 5 s for "
    f"{n_subs} subscriptions.",
    f"The knee is where a stream's rate passes B / P: {knees[5]:.2f} and {knees[10]:.2f} "
    "firings/s in total at P = 1 s for batch 5 and 10; above it the backlog grows without end.",
    f"For a p99 budget of 1.5 s the cheapest setting that keeps up is P = {rec[P]:g} s with "
    f"batch {rec[B]} ({rec['polls_per_s']:g} queries/s): choose P from the budget, then a batch "
    "limit with B / P well above the busiest stream's peak.",
)
