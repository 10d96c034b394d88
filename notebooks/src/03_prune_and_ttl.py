# %% [markdown]
# # 3 · Prune and TTL
#
# **Question:** how big does `reactor_firings` get, and what does keeping it small cost
# a subscriber that stops reading?
#
# The log grows by one row per firing. A prune loop runs every
# `reactor_firings_prune_interval` and deletes firings older than
# `reactor_firings_retention`. The seeds disagree on one word: the shipped prune is a
# plain TTL (`prune_policy = "ttl"`: "firings older than the cutoff will be silently
# dropped"), while seed 000 adds "*and* every active subscription has
# `last_seen_fired_at >= fired_at`" (`"conservative"`). Both are here. Every run below is
# five virtual minutes at 2 quotes/s with a prune every 10 s: the retention is scaled
# down from 7 days to a minute so that the whole story fits.

# %%
%matplotlib inline
import pandas as pd
import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim.widgets import prune_control

pd.set_option("display.width", 160)

# %% [markdown]
# ## Table size over time under retention
#
# With every subscriber keeping up, the table holds what arrived in the last retention
# window R plus what arrived since the last prune: a sawtooth with one tooth per prune
# interval I, on average rate × (R + I / 2) rows.

# %%
steady = {f"retention {r:g} s": analysis.retention_run("ttl", retention=r, pause=0) for r in (30.0, 60.0, 120.0)}
for label, sim in steady.items():
    r = sim.config.reactor_firings_retention
    rows = analysis.table_size_summary(sim, after=r + 20)
    print(f"{label}: mean {rows['mean']} rows once warm (theory {2 * (r + 5):.0f}), "
          f"range {rows['min']}-{rows['max']}, {sim.metrics()['fanoutsim_reactor_firings_pruned_total']:g} pruned")

# %%
fig = plots.table_size_over_time(steady, title="reactor_firings under a plain TTL, all subscribers keeping up")
fig

# %% [markdown]
# ## A subscription paused longer than the retention
#
# Two subscriptions read the stream; one of them (`paused`) is paused from t = 25 s for
# 120 s — twice the 60 s retention. Under `ttl` the prune deletes what it has not read
# yet; under `conservative` the prune waits for it.

# %%
ttl = analysis.retention_run("ttl", retention=60.0, pause=120.0)
conservative = analysis.retention_run("conservative", retention=60.0, pause=120.0)
for name, sim in (("ttl", ttl), ("conservative", conservative)):
    print(f"--- prune_policy = {name!r}")
    print(fs.check(sim))

# %%
fig = plots.table_size_over_time({"ttl": ttl, "conservative": conservative}, retention=60.0,
                                 title="Paused 25-145 s, retention 60 s")
fig

# %% [markdown]
# Under `ttl` the checker finds the paused subscription's losses, all with cause
# `pruned`, and still calls the run valid: the configuration says a TTL may drop firings,
# so nothing it *promised* was lost. Under `conservative` the table grows while the
# subscription is paused, nothing is lost, and when it resumes it drains the whole
# backlog and the next prune deletes it at once.
#
# ## A subscription that is never polled
#
# A subscription whose watermark stays NULL (its runner is stuck, it was created and
# forgotten) "holds the entire log open" under seed 000's rule. A third subscription,
# `archive`, is never polled in this run. The documented mitigation is to *disable* a
# subscription rather than let it go stale: a disabled one holds nothing open.

# %%
never = {
    "ttl, never polled": analysis.retention_run("ttl", pause=0, never_polled=True),
    "conservative, never polled": analysis.retention_run("conservative", pause=0, never_polled=True),
    "conservative, disabled": analysis.retention_run("conservative", pause=0, disabled=True),
}
fig = plots.table_size_over_time(never, retention=60.0, title="A subscription that never reads")
fig

# %% [markdown]
# ## The storage cost of each choice
#
# Rows at the peak and at the end, the payload they hold, what was pruned, what each
# subscription lost, and the checker's verdict.

# %%
cases = {
    "ttl, pause 120 s": dict(policy="ttl"),
    "conservative, pause 120 s": dict(policy="conservative"),
    "ttl, pause 120 s, retention 180 s": dict(policy="ttl", retention=180.0),
    "ttl, never polled": dict(policy="ttl", pause=0, never_polled=True),
    "conservative, never polled": dict(policy="conservative", pause=0, never_polled=True),
    "conservative, disabled": dict(policy="conservative", pause=0, disabled=True),
}
cost = analysis.retention_table(cases)
cost[["case", "peak_rows", "end_rows", "peak_kb", "pruned", "lost_paused", "lost_archive", "lost_disabled",
      "valid"]].set_index("case")

# %% [markdown]
# ## Try it
#
# Retention, pause length and prune policy; each change re-runs the seeded simulation
# (five virtual minutes, the pause starting at t = 25 s) and redraws. Executed headless,
# the control shows its default state, drawn again below it.

# %%
# NBVAL_IGNORE_OUTPUT
control = prune_control(retention=60.0, pause=120.0, policy="ttl")
control

# %%
print({k: control.result[k] for k in ("prune_policy", "retention_s", "peak_rows", "pruned", "lost_paused")})
control.figure

# %% [markdown]
# The disabled subscription lost the 458 firings the conservative prune deleted while it
# was disabled, and the checker still calls the run valid: seed 000's conservative rule
# only waits for *enabled* subscriptions, so a disabled one is promised nothing for that
# time (the trace records each enable and disable, which is how the checker knows).
# Disabling is the documented way out of holding the log open, and this is its price:
# whatever is pruned while disabled, that subscription never sees.
#
# ## What to take away
#
# - **Under a plain TTL the table is bounded by the traffic of one retention window:**
#   a sawtooth averaging rate × (R + I / 2) rows: a mean of 69.8 rows for R = 30 s
#   (theory 70), 130.5 for 60 s (130) and 252.3 for 120 s (250).
# - **A subscriber paused longer than the retention loses what was pruned under `ttl`.**
#   Paused for 120 s against a 60 s retention, `paused` lost 111 of its 591 firings, every
#   one with cause `pruned`, while `live` lost none; the checker calls it valid because a
#   TTL is allowed to drop. Under `conservative` it lost nothing and got all 588 it could
#   by the end (3 pending), for a table that peaked at 247 rows instead of 151.
# - **Waiting is cheaper than a longer retention.** Raising the retention to 180 s also
#   saves the paused subscriber (0 lost), but keeps 377 rows at the end and peaks at 390;
#   `conservative` holds the extra rows only while someone needs them (133 at the end).
# - **A never-polled subscription holds the log open under `conservative`:** nothing
#   pruned in five minutes, 591 rows (48.3 kB of payload) and growing by the firing rate
#   for as long as it stays. Under `ttl` the same subscription silently loses everything
#   older than the retention (458 firings). Disabling it lets the prune run (151 rows at
#   the peak), and the disabled subscription loses those 458.
# - **Pick by who may stall:** `ttl` bounds storage and drops for stalled subscribers
#   (watch `fanoutsim_reactor_firings_pruned_total`); `conservative` never drops for an
#   enabled subscriber and lets one stalled subscriber grow the table without bound.
