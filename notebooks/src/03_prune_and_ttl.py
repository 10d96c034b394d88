# %% [markdown]
# # 3 · Prune and TTL
#
# **What you will learn**
# - how big the firings table gets under a retention window, and what shape its size takes
#   over time;
# - the *TTL gotcha*: what a subscriber that stops reading for longer than the retention
#   costs under a plain TTL, and under a conservative prune;
# - what a subscription that is never polled costs, and what disabling it costs instead.
#
# **What you need first:** [0 · A tour](00_tour.ipynb) — the firings log and the watermark.
#
# **Run All:** about 4 s on two cores.
#
# **The system modelled.** Cloacina's prune loop runs every `reactor_firings_prune_interval`
# and deletes firings older than `reactor_firings_retention`. Its two documents disagree on
# one word: the shipped prune is a plain TTL (`prune_policy = "ttl"`: "firings older than the
# cutoff will be silently dropped"), while the design document adds "*and* every active
# subscription has `last_seen_fired_at >= fired_at`" (`"conservative"`). Both are here. Every
# run below is five virtual minutes at 2 quotes/s with a prune every 10 s: the retention is
# scaled down from 7 days to a minute so that the whole story fits.

# %%
%matplotlib inline
import pandas as pd

import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim import exercises as ex
from fanoutsim import lesson
from fanoutsim.widgets import prune_control

RATE, PRUNE_EVERY = 2.0, 10.0

# %% [markdown]
# ## 1. The table under retention
#
# Every subscriber keeps up. Retention R, a prune every I = 10 s, 2 firings a second.
#
# > **Predict.** On average, how many rows does the table hold once it is warm, for
# > R = 60 s? (a) 120 = rate × R; (b) 130 = rate × (R + I/2); (c) 140 = rate × (R + I).
#
# The experiment, `analysis.retention_run`, is one subscription `live` and one `paused` (here
# never paused) on reactor `r`:

# %%
lesson.show_source(analysis.retention_run)

# %%
steady = {f"retention {r:g} s": analysis.retention_run("ttl", retention=r, pause=0)
          for r in (30.0, 60.0, 120.0)}
rows = []
for label, sim in steady.items():
    r = sim.config.reactor_firings_retention
    size = analysis.table_size_summary(sim, after=r + 20)
    rows.append({"retention (s)": r, "mean rows once warm": size["mean"],
                 "theory rate x (R + I/2)": RATE * (r + PRUNE_EVERY / 2),
                 "fewest": size["min"], "most": size["max"],
                 "pruned": sim.metrics()["fanoutsim_reactor_firings_pruned_total"]})
sizes = pd.DataFrame(rows).set_index("retention (s)")
lesson.table(sizes, digits=1)

# %%
fig = plots.table_size_over_time(steady, title="reactor_firings under a plain TTL, all keeping up")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** (b). Between two prunes the table grows by rate × I, and each prune takes it back
# to what arrived in the last R seconds: a sawtooth with one tooth per prune, whose mean is
# rate × (R + I / 2).
#
# </details>
#
# ## 2. A subscription paused longer than the retention
#
# Two subscriptions read the stream; `paused` stops from t = 25 s for 120 s — twice the 60 s
# retention — then resumes.
#
# > **Predict.** Under `ttl`, does `paused` lose firings? Under `conservative`? What does the
# > checker call each run: valid, or not?

# %%
ttl = analysis.retention_run("ttl", retention=60.0, pause=120.0)
conservative = analysis.retention_run("conservative", retention=60.0, pause=120.0)
verdicts = pd.DataFrame({name: analysis.retention_cost(sim)
                         for name, sim in (("ttl", ttl), ("conservative", conservative))})
verdicts.loc["lost, by cause"] = [fs.check(sim).total["lost_by_cause"] or "none"
                                  for sim in (ttl, conservative)]
verdicts.loc[["peak_rows", "end_rows", "pruned", "lost_live", "lost_paused", "lost, by cause",
              "pending", "valid"]]

# %%
fig = plots.table_size_over_time({"ttl": ttl, "conservative": conservative}, retention=60.0,
                                 paused=(25.0, 145.0), title="Paused 25-145 s, retention 60 s")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Under `ttl` the paused subscription loses what was pruned before it got there —
# every loss with cause `pruned` — and the checker still calls the run valid: the
# configuration says a TTL may drop firings, so nothing it *promised* was lost. Under
# `conservative` the table grows while the subscription is paused, nothing is lost, and when
# it resumes it drains the backlog and the next prune deletes it at once.
#
# </details>
#
# ## 3. A subscription that is never polled
#
# A subscription whose watermark stays NULL: its runner is stuck, or it was created and
# forgotten. The design document's mitigation for what it costs is to *disable* it.
#
# > **Predict.** A third subscription, `archive`, is never polled. Under `conservative`, how
# > many firings are pruned in five minutes?

# %%
never = {
    "ttl, never polled": analysis.retention_run("ttl", pause=0, never_polled=True),
    "conservative, never polled": analysis.retention_run("conservative", pause=0,
                                                         never_polled=True),
    "conservative, disabled": analysis.retention_run("conservative", pause=0, disabled=True),
}
fig = plots.table_size_over_time(never, retention=60.0, title="A subscription that never reads")
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** None: the never-polled subscription "holds the entire log open" under the
# conservative rule, as the design document says. Disabling it lets the prune run — a disabled
# subscription holds nothing open — and what is pruned while it is disabled, it never sees.
#
# </details>
#
# ## 4. The storage cost of each choice
#
# The cases above side by side, with one more: a TTL long enough for the pause (180 s).
#
# > **Predict.** Which case keeps the most rows at its peak? And is there one that loses
# > nothing and keeps fewer rows than `conservative` does for a never-polled subscription?

# %%
cases = {
    "ttl, pause 120 s": dict(policy="ttl"),
    "conservative, pause 120 s": dict(policy="conservative"),
    "ttl, pause 120 s, retention 180 s": dict(policy="ttl", retention=180.0),
    "ttl, never polled": dict(policy="ttl", pause=0, never_polled=True),
    "conservative, never polled": dict(policy="conservative", pause=0, never_polled=True),
    "conservative, disabled": dict(policy="conservative", pause=0, disabled=True),
}
cost = analysis.retention_table(cases).set_index("case")
cost = cost[["peak_rows", "end_rows", "peak_kb", "pruned", "lost_paused", "lost_archive",
             "lost_disabled", "valid"]]
lesson.table(cost, digits=1, highlight=["peak_rows", "lost_paused"])

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Storage and losses trade against each other, and the checker calls every case
# valid: each loses only what its configuration allows. A never-polled subscription under
# `conservative` keeps the whole log (the most rows, growing for as long as the run lasts).
# A TTL longer than the pause loses nothing and its peak is bounded by the TTL; a short TTL
# keeps the table smallest and costs the paused subscription what was pruned under it.
#
# </details>

# %% [markdown]
# ## 5. Try it
#
# Retention, pause length and prune policy: each change re-runs the seeded five minutes (the
# pause starting at t = 25 s) and redraws.

# %%
control = prune_control(retention=60.0, pause=120.0, policy="ttl")
lesson.needs_kernel(control.widget, "move the sliders and pick a policy")

# %% [markdown]
# ## Exercises
#
# ### Exercise 3.1 — the size of the table
#
# Write `mean_rows(retention)`: `analysis.retention_run("ttl", retention=retention, pause=0)`
# (2 firings/s, a prune every 10 s), and return the mean number of rows once warm —
# `analysis.table_size_summary(sim, after=retention + 20)["mean"]`. The checker compares it
# with the sawtooth's mean for two retentions.

# %%
def mean_rows(retention):
    ...  # your code here


ex.check("3.1", mean_rows)

# %% solution
from fanoutsim import analysis
from fanoutsim import exercises as ex


def mean_rows(retention):
    sim = analysis.retention_run("ttl", retention=retention, pause=0)
    return analysis.table_size_summary(sim, after=retention + 20)["mean"]


ex.check("3.1", mean_rows)

# %% [markdown]
# ### Exercise 3.2 — who loses under a TTL
#
# Write `lost(policy, pause)`: `analysis.retention_run(policy, retention=60.0, pause=pause)`,
# and return how many firings the paused subscription lost
# (`analysis.retention_cost(sim)["lost_paused"]`). The checker tries both policies, with a
# pause shorter and one longer than the retention.

# %%
def lost(policy, pause):
    ...  # your code here


ex.check("3.2", lost)

# %% solution
from fanoutsim import analysis
from fanoutsim import exercises as ex


def lost(policy, pause):
    sim = analysis.retention_run(policy, retention=60.0, pause=pause)
    return analysis.retention_cost(sim)["lost_paused"]


ex.check("3.2", lost)

# %% [markdown]
# ## What to take away

# %% hidden
c = cost
lesson.takeaway(
    f"Under a plain TTL the table is a sawtooth averaging rate × (R + I/2) rows: "
    f"{sizes.loc[60.0, 'mean rows once warm']:.1f} for R = 60 s (theory "
    f"{sizes.loc[60.0, 'theory rate x (R + I/2)']:.0f}).",
    f"A subscriber paused longer than the retention loses what was pruned under `ttl` "
    f"({c.loc['ttl, pause 120 s', 'lost_paused']} firings, all `pruned`, and the run is valid); "
    f"under `conservative` it loses {c.loc['conservative, pause 120 s', 'lost_paused']}.",
    f"Waiting is cheaper than a longer retention: `conservative` peaked at "
    f"{c.loc['conservative, pause 120 s', 'peak_rows']} rows, a 180 s TTL at "
    f"{c.loc['ttl, pause 120 s, retention 180 s', 'peak_rows']}.",
    f"A never-polled subscription holds the log open under `conservative` "
    f"({c.loc['conservative, never polled', 'pruned']} pruned in 5 minutes); disabling it frees "
    f"the log, and it loses the {c.loc['conservative, disabled', 'lost_disabled']} firings pruned "
    "meanwhile.",
    "Pick by who may stall: `ttl` bounds storage and drops for stalled subscribers; "
    "`conservative` never drops for an enabled one and lets a stalled one grow the table.",
)
