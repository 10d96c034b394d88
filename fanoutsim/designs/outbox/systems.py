"""The outbox in the systems people run: the runs and figures of the lesson
``notebooks/src/14_systems_you_run.py``.

* :func:`lost_hint_cost` — what a lost NOTIFY costs a procrastinate or pgqueuer
  worker (the presets of :mod:`.presets`) at its default poll, over a range of
  job rates; :func:`lost_hint_figure` draws it.
* :func:`race_run`, :func:`race_timeline` — procrastinate's lost wake-up, one
  race shown read by read, with the wake flag cleared after the fetch and armed
  before it (the fix); :func:`race_count` and :func:`race_table` — how often it
  happens at the preset's measured costs.
* :func:`offsets_run` — Kafka's consumer-group offsets as the outbox's cursors:
  a slow consumer beside a fast one, and crashes between the handling and the
  cursor's write (at-least-once).
* :func:`commit_order_run` — a seq cursor read by polling against late commits,
  the hole a CDC relay reading the WAL in commit order does not have.

Every run is seeded and on the virtual clock.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fanoutsim.designs.faults import LateCommit, Notifications
from fanoutsim.designs.outbox.analysis import handled_latency
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.config import OutboxConfig
from fanoutsim.designs.outbox.presets import preset
from fanoutsim.kernel.faults import CrashAtPoint, FaultPlan
from fanoutsim.kernel.plotting import style

PRESET_NAMES = ("procrastinate-3.10", "pgqueuer-1.6")
RATES = (1 / 60, 0.1, 0.5, 2.0, 5.0)  # jobs per second: one a minute ... five a second


def _sim(config: OutboxConfig, plan: FaultPlan | None = None, seed: int = 0):
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    return OutboxSimulation(config, seed=seed, faults=plan)


# -- 1. what a lost NOTIFY costs -----------------------------------------------------
def preset_run(name: str, rate: float, *, drop: float = 0.1, jobs: int = 400, seed: int = 0, **overrides):
    """One worker of the preset ``name`` (its default poll, loop rules and measured
    costs), Poisson jobs at ``rate``/s for ``jobs / rate`` seconds and one poll interval
    more (so the last jobs measured are not the last of the traffic), ``drop`` of the
    hints lost. The run keeps its reads (``sim.reads``: start, cost, found rows)."""
    config = OutboxConfig.preset(name, **overrides)
    sim = _recording(config, FaultPlan([preset(name).notifications(drop=drop)]), seed)
    sim.register_consumer("worker")
    poll = config.safety_poll_interval
    sim.add_workload(rate, stop=jobs / rate + poll)  # jobs keep coming past the window measured
    sim.run(until=jobs / rate + 3 * poll + 1.0)
    return sim


def job_latencies(sim) -> pd.DataFrame:
    """Per job: commit -> handled (``latency_s``), and whether its own hint arrived before
    it was handled (a status write's hint names a job already handled: not its own)."""
    lat = handled_latency(sim)
    t = sim.trace()
    hints = t[t["kind"] == "hint"]
    first = ((hints["t"] - sim.start_us) / 1e6).groupby(hints["seq"].astype(int)).min()
    heard = lat["seq"].map(first)
    return lat.assign(hinted=heard.notna() & (heard <= lat["handled_s"] + 1e-9))


def lost_hint_cost(rates=RATES, *, drop: float = 0.1, jobs: int = 1000, seed: int = 0) -> pd.DataFrame:
    """For each preset and job rate: the poll, how many jobs lost their hint, and
    the latency of those (mean, p99, max) beside every job's (p50, p99)."""
    rows = []
    for name in PRESET_NAMES:
        poll = OutboxConfig.preset(name).safety_poll_interval
        for rate in rates:
            lat = job_latencies(preset_run(name, rate, drop=drop, jobs=jobs, seed=seed))
            lat = lat[lat["committed_s"] <= jobs / rate]  # the window, before the traffic's tail
            lost = lat.loc[~lat["hinted"], "latency_s"]
            rows.append(
                {
                    "preset": name,
                    "poll_s": poll,
                    "rate": rate,
                    "jobs": len(lat),
                    "hints_lost": len(lost),
                    "lost_mean_s": lost.mean(),
                    "lost_p99_s": lost.quantile(0.99),
                    "lost_max_s": lost.max(),
                    "all_p50_s": lat["latency_s"].median(),
                    "all_p99_s": lat["latency_s"].quantile(0.99),
                }
            )
    return pd.DataFrame(rows)


def lost_hint_figure(table: pd.DataFrame) -> Figure:
    """The mean wait of a job whose hint was lost against the job rate, per preset,
    with the two bounds: the next job's hint (1 / rate) and half the poll."""
    with style():
        fig = Figure(figsize=(8.0, 4.5), layout="constrained")
        ax = fig.add_subplot()
        rates = np.geomspace(table["rate"].min(), table["rate"].max(), 50)
        ax.plot(rates, 1 / rates, color="#333333", ls=":", lw=1, label="next job's hint: 1 / rate")
        for (name, part), color in zip(table.groupby("preset", sort=False), ("#1f77b4", "#ff7f0e")):
            poll = float(part["poll_s"].iloc[0])
            ax.plot(part["rate"], part["lost_mean_s"], "o-", color=color, label=f"{name}: a lost hint's job")
            ax.axhline(poll / 2, color=color, ls="--", lw=1, label=f"{name}: half its {poll:g} s poll")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ticks = sorted(set(table["rate"]))
        ax.set_xticks(ticks, [f"1 per {1 / r:g} s" if r < 1 else f"{r:g}/s" for r in ticks])
        ax.set_xticks([], minor=True)
        ax.set_yticks([0.1, 0.3, 1, 3, 10, 30], ["0.1", "0.3", "1", "3", "10", "30"])
        ax.set_xlabel("jobs per second (Poisson)")
        ax.set_ylabel("mean wait of a job whose NOTIFY was lost (s)")
        ax.set_title("A lost NOTIFY costs the next job's gap, up to half the poll")
        ax.legend(loc="lower left")
    return fig


# -- 2. the lost wake-up ----------------------------------------------------------------
def race_run(wake_mode: str, *, read_cost: float = 0.01, hint_delay: float = 0.001, poll: float = 5.0):
    """procrastinate's race, one job at a time: job 1 commits at 1.0 and its hint wakes
    the worker; the worker's last, empty fetch reads at 1.0 + hint + read and takes
    ``read_cost``; job 2 commits just after that read began, so its hint lands while the
    fetch is in flight. Job 3's hint (at 3 s) is lost: only the poll can rescue job 2.
    The run keeps its reads (``sim.reads``: start, cost, found rows) for the timeline."""
    config = OutboxConfig(
        safety_poll_interval=poll, poll_mode="idle", wake_mode=wake_mode, batch_limit=1, read_cost=read_cost
    )
    sim = _recording(config, FaultPlan([Notifications(delay=hint_delay)]))
    sim.register_consumer("worker")
    sim.channel.lose_hints({3})
    empty_fetch = 1.0 + hint_delay + read_cost  # when the last, empty fetch of job 1's round reads
    for t in (1.0, empty_fetch + read_cost / 10, 3.0):
        sim.run(until=t)
        sim.commit("p")
    sim.run(until=10.0)
    return sim


def _recording(config: OutboxConfig, plan: FaultPlan, seed: int = 0):
    """An OutboxSimulation that notes each read: when it began, its cost, whether it found rows."""
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    class Recording(OutboxSimulation):
        reads: list

        def _read_cost(self, name):
            draw = super()._read_cost(name)

            def noted(found: bool) -> float:
                cost = draw(found)
                self.reads.append((self.now, cost, found))
                return cost

            return noted

    sim = Recording.__new__(Recording)
    sim.reads = []
    Recording.__init__(sim, config, seed=seed, faults=plan)
    return sim


def _events(sim, kinds) -> pd.DataFrame:
    t = sim.trace()
    t = t[t["kind"].isin(kinds) & t["seq"].notna()]
    return t.assign(t_s=(t["t"] - sim.start_us) / 1e6, job=t["seq"].astype(int))


def race_timeline(runs: dict, *, window=(0.995, 1.05)) -> Figure:
    """One row per run (``{label: race_run(...)}``, the first on top): the worker's
    reads (bars; hatched: found nothing), the commits and hints of jobs 1 and 2, and
    when job 2 was handled."""
    with style():
        fig = Figure(figsize=(9.0, 1.6 + 1.2 * len(runs)), layout="constrained")
        ax = fig.add_subplot()
        ms = lambda t: (t - window[0]) * 1000  # noqa: E731
        for i, sim in enumerate(runs.values()):
            y = len(runs) - 1 - i
            for start, cost, found in sim.reads:
                ax.barh(
                    y,
                    cost * 1000,
                    left=ms(start),
                    height=0.3,
                    color="#c7d7ea",
                    edgecolor="#1f77b4",
                    hatch=None if found else "//",
                )
            ev = _events(sim, ["committed", "hint", "delivered"])
            # job 1's handling would sit beside job 2's commit, as if job 2's: only job 2's is the story
            ev = ev[ev["job"].isin([1, 2]) & ((ev["kind"] != "delivered") | (ev["job"] == 2))]
            for kind, marker, color, name in (
                ("committed", "|", "#333333", "commit"),
                ("hint", "v", "#ff7f0e", "hint"),
                ("delivered", "*", "#2ca02c", "handled"),
            ):
                part = ev[ev["kind"] == kind]
                ax.scatter(
                    ms(part["t_s"]),
                    [y + 0.32] * len(part),
                    marker=marker,
                    s=90,
                    color=color,
                    label=name if i == 0 else None,
                    zorder=3,
                )
            for job, at in ev[ev["kind"] == "committed"][["job", "t_s"]].itertuples(index=False):
                ax.annotate(f"job {job}", (ms(at), y + 0.42), ha="right", fontsize=8)
            at = ev.set_index(["kind", "job"])["t_s"]
            waited = 1000 * (at[("delivered", 2)] - at[("committed", 2)])
            ax.annotate(
                f"job 2 handled {waited:,.0f} ms after its commit",
                xy=(0.99, y - 0.22),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="top",
                fontsize=9,
            )
        ax.set_yticks(range(len(runs)), list(reversed(list(runs))))
        ax.set_ylim(-0.7, len(runs) - 0.1)
        ax.set_xlim(0, (window[1] - window[0]) * 1000)
        ax.set_xlabel(f"ms after t = {window[0]:g} s (bars: the worker's fetches; hatched: found nothing)")
        ax.set_title("A hint during the last, empty fetch: erased, or a reason to read again")
        ax.legend(loc="upper right", ncol=3)
    return fig


def race_count(wake_mode: str, *, rate: float = 5.0, minutes: float = 60.0, seed: int = 0, **overrides):
    """The procrastinate preset (its measured costs) with every hint delivered, ``rate``
    jobs/s for ``minutes``; the finished run (its reads kept)."""
    return preset_run(
        "procrastinate-3.10", rate, drop=0.0, jobs=int(rate * minutes * 60), seed=seed, wake_mode=wake_mode, **overrides
    )


def in_the_window(sim) -> pd.Series:
    """Per job, whether its hint landed in the window of the race: while a read that
    found nothing was in flight, the job committed after that read began (so the read
    could not see it)."""
    lat = job_latencies(sim)
    t = sim.trace()
    hints = t[t["kind"] == "hint"]
    heard = ((hints["t"] - sim.start_us) / 1e6).groupby(hints["seq"].astype(int)).min()
    empty = np.array([(start, start + cost) for start, cost, found in sim.reads if not found]).reshape(-1, 2)
    starts, ends = empty[:, 0], empty[:, 1]
    h = lat["seq"].map(heard).to_numpy(dtype=float)
    k = np.searchsorted(starts, h, side="right") - 1  # the last empty read that began by the hint
    ok = k >= 0
    kk = np.where(ok, k, 0)
    inside = ok & (h < ends[kk]) & (lat["committed_s"].to_numpy() > starts[kk])
    return pd.Series(inside, index=lat["seq"])


def race_table(runs: dict) -> pd.DataFrame:
    """Per run (``{label: race_count(...)}``): jobs; those whose hint landed in the
    window of the race, and how long those waited (mean, max); every job's p99, p99.9
    and max (ms)."""
    rows = []
    for label, sim in runs.items():
        lat = job_latencies(sim)
        hit = in_the_window(sim).to_numpy()
        x, caught = lat["latency_s"], lat["latency_s"][hit]
        rows.append(
            {
                "run": label,
                "jobs": len(lat),
                "in_the_window": int(hit.sum()),
                "their_mean_ms": 1000 * caught.mean(),
                "their_max_ms": 1000 * caught.max(),
                "p99_ms": 1000 * x.quantile(0.99),
                "p99.9_ms": 1000 * x.quantile(0.999),
                "max_ms": 1000 * x.max(),
            }
        )
    return pd.DataFrame(rows)


# -- 3. Kafka offsets and CDC -----------------------------------------------------------
def offsets_run(
    *, rate: float = 2.0, seconds: float = 300.0, slow: float = 0.4, crashes=(100, 200, 300), seed: int = 0
):
    """A ``fast`` consumer (10 ms a row) and a ``slow`` one (``slow`` s a row), each with
    its own cursor (a consumer group's committed offset); the dispatcher crashes between
    handling a row and writing the cursor at the ``crashes``-th passes of that point."""
    plan = FaultPlan([CrashAtPoint("dispatch.after_handle_before_cursor", nth=n, downtime=1.0) for n in crashes])
    sim = _sim(OutboxConfig(safety_poll_interval=1.0), plan, seed)
    sim.register_consumer("fast", duration=0.01)
    sim.register_consumer("slow", duration=slow, timeout=None)
    sim.add_workload(rate, stop=seconds)
    sim.run(until=seconds * max(1.0, rate * slow) + 60.0)
    return sim


def offsets_summary(sim) -> pd.DataFrame:
    """Per consumer: delivered, duplicates (by cause), lost, and latency p50 / p99 (s)."""
    report = check_outbox(sim)
    lat = handled_latency(sim)
    rows = []
    for c in ("fast", "slow"):
        x = lat.loc[lat["consumer"] == c, "latency_s"]
        dups = report.duplicates[report.duplicates["consumer"] == c]
        per = report.per_consumer.set_index("consumer").loc[c]
        rows.append(
            {
                "consumer": c,
                "delivered": int(per["delivered"]),
                "duplicates": len(dups),
                "causes": dict(dups["cause"].value_counts()),
                "lost": int(per["lost"]),
                "p50_s": x.median(),
                "p99_s": x.quantile(0.99),
            }
        )
    return pd.DataFrame(rows)


def commit_order_run(
    read_mode: str,
    *,
    rate: float = 20.0,
    seconds: float = 120.0,
    late: float = 0.05,
    gap_timeout: float = 2.0,
    seed: int = 0,
):
    """Writers at ``rate``/s, ``late`` of them committing up to 0.5 s after taking
    their seq; one consumer reading past its seq cursor in ``read_mode`` ("all": what
    is visible; "gap": wait at a missing seq), polled every 0.2 s."""
    plan = FaultPlan([LateCommit(probability=late, delay={"dist": "uniform", "low": 0.0, "high": 0.5})])
    config = OutboxConfig(safety_poll_interval=0.2, read_mode=read_mode, gap_timeout=gap_timeout)
    sim = _sim(config, plan, seed)
    sim.register_consumer("relay")
    sim.add_workload(rate, stop=seconds)
    sim.run(until=seconds + 5.0)
    return sim


def commit_order_summary(runs: dict) -> pd.DataFrame:
    """Per run (``{read_mode: commit_order_run(...)}``): committed, delivered, lost
    (skipped under the cursor), and latency p50 / p99 (s)."""
    rows = []
    for mode, sim in runs.items():
        report = check_outbox(sim)
        x = handled_latency(sim)["latency_s"]
        rows.append(
            {
                "read_mode": mode,
                "committed": int(report.total["committed"]),
                "delivered": int(report.total["delivered"]),
                "lost": int(report.total["lost"]),
                "p50_s": x.median(),
                "p99_s": x.quantile(0.99),
            }
        )
    return pd.DataFrame(rows)
