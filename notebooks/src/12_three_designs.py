# %% [markdown]
# # 12 · One workload, three designs
#
# **What you will learn**
# - to run one stream of events and one set of faults through the reactor, the outbox and
#   leased consumers, and read them side by side: latency, database load, duplicates, losses;
# - what each design pays for its guarantees, busy and idle;
# - which design fits which need, in plain words.
#
# **What you need first:** one lesson of each design — [1 · Latency budget](01_latency_budget.ipynb)
# (the reactor), [8 · Outbox](08_outbox.ipynb) and [10 · Leased consumers](10_leases.ipynb) —
# and [2 · Duplicate deliveries](02_duplicate_deliveries.ipynb).
#
# **Run All:** about 2 s on two cores.
#
# **The systems modelled.** Cloacina's reactor subscriptions (a log read by a poll loop past a
# timestamp watermark), Subspace's transactional outbox (a log read past a cursor, woken by a
# hint or a safety poll) and RiffDB's leased durable consumers (events leased, acked with a
# token, within a window past a checkpoint). The experiment is
# [`experiments/three_designs.py`](experiments/three_designs.py), beside this notebook.

# %%
%matplotlib inline
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fanoutsim import exercises as ex
from fanoutsim import lesson, plots
from experiments import three_designs as td

workload = td.Workload()
pd.Series({"events per second": workload.rate, "seconds": workload.seconds,
           "events": len(workload.times()), "consumers": ", ".join(td.CONSUMERS),
           "crashes": len(workload.crashes), "down for (s)": workload.downtime},
          name="the workload").to_frame()

# %% [markdown]
# ## 1. The same stream, the same faults
#
# The arrival times are drawn once and written into each design by hand: a firing, an outbox
# commit, a published event. Two consumers read everything: `indexer` works 10 ms per event,
# `mailer` 200 ms. The process crashes three times, each time at its design's riskiest moment
# — an effect done, the progress that records it not yet committed — and stays down 2 s:

# %%
pd.Series(td.RISKY_POINT, name="where each design crashes").to_frame()

# %%
lesson.show_source(td.feed)

# %% [markdown]
# > **Predict.** Rank the three designs by the median time from an event's write to
# > `indexer` having handled it. Which of them loses events when it crashes?

# %%
summary, latencies, runs = td.compare(workload)
lesson.table(summary.drop(columns="causes"), digits=3,
             highlight=["indexer p50 (s)", "transactions per event"])

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The outbox first: its `indexer` p50 is about its own 10 ms of work. Then leased
# consumers, about half their client's 0.5 s pull interval; then the reactor, about half its
# 1 s poll. None lost an event; section 4 says why.
#
# </details>
#
# ## 2. Latency, side by side
#
# One panel per design, the two consumers in each (log time axis, from 5 ms to 20 s; each
# panel its own count scale).

# %%
with plots.style():
    fig = Figure(figsize=(10, 3.9), layout="constrained")
    axes = fig.subplots(1, 3, sharex=True)  # each its own count scale: the outbox's spike is tall
    bins = np.geomspace(0.005, 20, 50)
    for ax, design in zip(axes, td.DESIGNS):
        mine = latencies[latencies["design"] == design]
        medians = []
        for i, name in enumerate(td.CONSUMERS):
            x = mine.loc[mine["consumer"] == name, "latency_s"].clip(lower=0.005)
            ax.hist(x, bins=bins, histtype="step", linewidth=1.5, color=f"C{i}",
                    label=f"{name} ({1000 * td.CONSUMERS[name]:.0f} ms of work)")
            ax.axvline(x.median(), color=f"C{i}", linestyle=":", linewidth=1.2)
            medians.append(f"{x.median():.2f} s")
        ax.set_xscale("log")
        plots.plain_log(ax, "x")
        ax.set_title(f"{design}: p50 {' and '.join(medians)}", fontsize=10)
        ax.set_xlabel("write → handled (s)")
    axes[0].set_ylabel("events")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8,
               title="dotted: each consumer's median", title_fontsize=8)
fig

# %% [markdown]
# **Read.** The outbox is woken by a hint at each commit: an event is handled within its own
# work time. The reactor waits for its poll (P = 1 s: half a second on average, then the
# executor's claim). Leased consumers wait for their client's next pull (every 0.5 s), then
# work. Their tails differ too: under a burst, the outbox and the reactor drain a batch at a
# time, while a leasing consumer has at most its in-flight limit of workers.
#
# ## 3. What each costs the database, busy and idle
#
# The table's `transactions per event` counts every time a design went to the store while
# the stream ran: writes, reads, commits of progress. Now the same consumers with no event at
# all for five minutes.
#
# > **Predict.** Which design sends the most queries to an idle database?

# %%
idle = pd.Series({d: td.idle_queries(d, seconds=300.0) for d in td.DESIGNS},
                 name="queries in 5 idle minutes").to_frame()
idle["per minute"] = idle.iloc[:, 0] / 5
idle

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The leases. Each design pays for waking up without a push. The reactor polls
# every subscription every second (its documentation's price for simplicity: `subscriptions /
# P` queries a second, whatever the traffic): 2 a second, 120 a minute. The outbox relies on
# hints and polls only as a safety net, every 5 s per consumer: 24 a minute. Each leasing
# client pulls every half second, and a pull is two transactions (the client reads its
# consumer's row, then takes leases): 2 clients × 2 pulls × 2 = 8 a second; recovery looks
# for expired leases once a second: 9 a second, 540 a minute — the price of pull-based
# consumers that must notice dead workers.
#
# </details>
#
# ## 4. Duplicates and losses
#
# > **Predict.** The three crashes each fall between an effect and its commit. How many
# > duplicates in each design — and does any design lose an event?

# %%
pd.DataFrame({"duplicates": summary["duplicates"], "lost": summary["lost"],
              "causes (the checker's)": summary["causes"].map(str)})

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Each crash re-delivers what was in flight, in every design — at-least-once is the
# contract of all three — and none loses an event: the log is the truth, and progress is
# committed only after the effect. The number per crash is each design's window: a firing in
# flight (the reactor under `per_firing`), the rows a consumer had handled past its cursor (the
# outbox), the leases whose effect landed before the ack (leases).
#
# </details>
#
# What differs between the designs is what *else* can cost a duplicate or a loss:
#
# | | reactor (Cloacina) | outbox (Subspace) | leases (RiffDB) |
# |---|---|---|---|
# | wakes on | its poll, every P | a hint, or the safety poll | its client's pull |
# | progress | a timestamp watermark per subscription | a seq cursor per consumer | a checkpoint per partition, acks by token |
# | loses events to | ties, late commits, clock skew, a TTL prune ([lesson 5](05_watermark_holes.ipynb), [3](03_prune_and_ttl.ipynb)) | late commits under `read_mode="all"` | nothing the checker has found; retire and restore lose by decision |
# | duplicates from | crashes, several pollers | crashes | crashes, work outliving its lease, restores |
# | a slow consumer | holds its own subscription | holds its own cursor | holds its own leases; a poison event holds its checkpoint |
# | a bad event | a filter error: `skip` or `hold` | parked after its retry budget | dead-lettered after 10 attempts |
# | what it costs | a query per subscription per P, always | a connection for LISTEN; a fetch per safety poll | pulls and recovery passes; leases to size against the work's tail |
#
# ## Which design for which need
#
# - **Fan-out to workflows that should start durably, from one process that already writes a
#   log** — and latency of half a poll interval is fine: the **reactor**. Simplest to run; pay a
#   steady poll load, close its timestamp holes (`watermark="settled"`) and make workflows
#   idempotent on the firing id.
# - **Many derived views and live pages that must follow every change within milliseconds**, in
#   the same database as the changes: the **outbox**. A change and its row commit together, a
#   hint makes it fast and the cursor makes it safe; make each consumer idempotent or
#   rebuildable.
# - **Independent workers that do slow or failing work per event, in parallel, with retries,
#   dead letters and operators who seek, retire and restore**: **leased consumers**. Size the
#   lease against the work's tail; partition for order, set `in_flight` for concurrency.
#
# ## Exercises
#
# ### Exercise 12.1 — which design?
#
# For each need, answer `"reactor"`, `"outbox"` or `"leases"`:
# (a) a search index and a live page must show a document edit within 50 ms, from the same
# database; (b) each event starts a call to a payment provider that takes 2-20 s and sometimes
# fails, and failures must be retried, then set aside; (c) a nightly report workflow starts
# from a few firings a minute, and a second's delay does not matter.

# %%
needs = {"a": ..., "b": ..., "c": ...}

ex.check("12.1", needs)

# %% solution
from fanoutsim import exercises as ex

needs = {"a": "outbox", "b": "leases", "c": "reactor"}
ex.check("12.1", needs)

# %% [markdown]
# ### Exercise 12.2 — an outbox without its hints
#
# Write `without_hints(poll)`: the outbox with every hint dropped and a safety poll every
# `poll` seconds (`fs.OutboxSimulation(OutboxConfig(safety_poll_interval=poll), seed=0,
# faults=FaultPlan([Notifications(drop=1.0)]))`), one consumer (10 ms a row), 2 commits/s for
# 300 s, run until every row is handled (`sim.run(until=300 + poll + 1)`); return the median
# commit → handled latency (`oa.handled_latency(sim)`). Compare with the reactor's.

# %%
def without_hints(poll):
    ...  # your code here


ex.check("12.2", without_hints)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex
from fanoutsim.analysis import outbox as oa
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.faults import FaultPlan, Notifications


def without_hints(poll):
    sim = fs.OutboxSimulation(OutboxConfig(safety_poll_interval=poll), seed=0,
                              faults=FaultPlan([Notifications(drop=1.0)]))
    sim.register_consumer("indexer", duration=0.01)
    sim.add_workload(2.0, stop=300.0)
    sim.run(until=300.0 + poll + 1)
    return float(oa.handled_latency(sim)["latency_s"].median())


ex.check("12.2", without_hints)

# %% [markdown]
# ## What to take away

# %% hidden
p50 = summary["indexer p50 (s)"]
lesson.takeaway(
    f"Latency follows how a design wakes: `indexer` handled an event in {p50['outbox']:.2f} s "
    f"(median) behind a hint, {p50['leases']:.2f} s behind a client's pull, {p50['reactor']:.2f} "
    "s behind a 1 s poll.",
    f"Idle, the database pays for the waking: {idle.loc['reactor', 'per minute']:.0f} reactor "
    f"polls, {idle.loc['outbox', 'per minute']:.0f} outbox fetches and "
    f"{idle.loc['leases', 'per minute']:.0f} leasing transactions a minute for two consumers.",
    f"At-least-once in all three: the same three crashes cost {summary['duplicates'].min()}-"
    f"{summary['duplicates'].max()} duplicates and {summary['lost'].sum()} losses in total; "
    "every consumer must be idempotent.",
    "Pick by need: the reactor to start durable workflows simply, the outbox for fast derived "
    "state in one database, leases for slow, failing, parallel work with operators.",
)
