"""Real against model, case by case: each comparison a :class:`Check` with its test.

=========  ===============================================================  ===============================
case       what is compared                                                 the test
=========  ===============================================================  ===============================
lease      duplicates (effects applied again) per message                   two Poisson rates, exact (the
                                                                            conditional binomial test)
kill       what was in flight at the kill is redelivered, nothing is lost,  identity, on both sides
           the duplicates are the in-flight messages whose effect landed
kill       freeze -> first redelivery, one a trial                          two-sample KS
kill       delivery -> redelivery (the lease)                               within ``tolerance`` of it
poison     deliveries of the poison message, their gaps, what the broker    identity (count, kind, floor),
           does at the limit and when, the ack floor then and after         times within ``tolerance``
floor      the ack floor after each ack, acked out of order                 identity
poisson    publish -> handled (the effect), every consumer; MaxAckPending   two-sample KS; identity
           binding: the most in flight at once
=========  ===============================================================  ===============================

A statistical test is run at ``alpha`` (each check says its own); the table
states each at 5% alone, and the test suite holds the family of them to 5%
together (Bonferroni), as the outbox's comparison does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fanoutsim.designs.leases.realbrokers.cases import KillCase, LeaseCase, PoisonCase, PoissonCase
from fanoutsim.designs.leases.realbrokers.record import BrokerRun
from fanoutsim.kernel.stats import ks_2samp, ks_critical, percentiles, rates_agree

# seconds: how far a time read by a consumer process may lie from the model's on a loaded
# machine (a process waits its turn on the CPU before it reads the clock)
TOLERANCE = 0.1
# seconds: how early a redelivery may seem, timed from the killed process's own reading of its
# delivery (read late when that process waited for the CPU; the broker's clock started before)
EARLY = 0.1


@dataclass(frozen=True)
class Check:
    """One line of a broker's table: real against model, and whether they agree."""

    case: str
    key: str  # what is checked, in a word (a test's id: :data:`KEYS`)
    what: str
    real: str
    model: str
    test: str
    agrees: bool
    statistical: bool = False  # a test at alpha (KS, rates) rather than an identity

    def row(self) -> str:
        verdict = "yes" if self.agrees else "NO"
        return f"| {self.case} | {self.what} | {self.real} | {self.model} | {self.test} | {verdict} |"


# each case's checks, by key (what the test suite asks of every broker)
KEYS = {
    "floor": ("floors",),
    "floor_interest": ("floors",),
    "poison": ("deliveries", "limit", "floor_limit", "floor_after"),
    "kill": ("outcome", "freeze", "delay"),
    "lease": ("rate", "handled"),
    "poisson": ("latency", "binding", "handled"),
}
TABLE_HEAD = "| case | what | real | model | test | agrees |\n|---|---|---|---|---|---|"


def table(broker: str, version: str, checks: list[Check]) -> str:
    return f"{broker} {version} against the model's preset\n{TABLE_HEAD}\n" + "\n".join(c.row() for c in checks)


def _ms(p: dict[int, float]) -> str:
    return " / ".join(f"{1000 * p[q]:.0f}" for q in (50, 90, 99)) + " ms"


def _ks(case: str, key: str, what: str, real: np.ndarray, model: np.ndarray, alpha: float) -> Check:
    d, crit = ks_2samp(real, model), ks_critical(len(real), len(model), alpha)
    return Check(
        case,
        key,
        what,
        f"{_ms(percentiles(real))} (n={len(real)})",
        f"{_ms(percentiles(model))} (n={len(model)})",
        f"KS {d:.3f} <= {crit:.3f} (alpha {alpha:.3g})",
        d <= crit,
        statistical=True,
    )


def _identity(case: str, key: str, what: str, real, model) -> Check:
    return Check(case, key, what, str(real), str(model), "identical", real == model)


def _pool(read, runs: list[BrokerRun]) -> np.ndarray:
    return np.concatenate([read(r) for r in runs]) if runs else np.asarray([], dtype=float)


# -- case 1: duplicates against a lease ----------------------------------------------------
def compare_lease(case: LeaseCase, real: BrokerRun, models: list[BrokerRun], alpha: float = 0.05) -> list[Check]:
    dr, dm = real.duplicates(), sum(m.duplicates() for m in models)
    nm = case.messages * len(models)
    r = rates_agree(dr, case.messages, dm, nm, alpha)
    rate = Check(
        case.name,
        "rate",
        f"duplicates per message, lognormal handlers (median {case.median:g} s) against a {case.lease:g} s lease",
        f"{r.rate1:.3f} ({dr} of {case.messages})",
        f"{r.rate2:.3f} ({dm} of {nm})",
        f"real/model in [{r.ratio_low:.2f}, {r.ratio_high:.2f}] ({1 - alpha:.3g})",
        r.agree,
        statistical=True,
    )
    return [rate, _all_handled(case.name, "every message handled", real, models, case.messages)]


def _all_handled(case: str, what: str, real: BrokerRun, models: list[BrokerRun], owed: int) -> Check:
    """Every message owed (per consumer) handled at least once, on both sides."""
    least = min(m.handled() for m in models)
    return Check(
        case,
        "handled",
        what,
        f"{real.handled()} of {owed}",
        f"{least} of {owed} (each run)",
        "all",
        real.handled() == owed and least == owed,
    )


# -- case 2: a consumer killed mid-batch ----------------------------------------------------
def kill_outcome(run: BrokerRun, consumer: str) -> dict:
    """What the kill did to ``consumer``: the messages in flight (taken, not acked by the
    killed process), redelivered, applied by it without an ack, applied twice because
    of the kill, applied more than once although it had acked them, and lost."""
    first = {e[3] for e in run.of("delivered", consumer=consumer) if e[4] == 1}
    acked1 = {e[3] for e in run.of("acked", consumer=consumer) if e[4] == 1}
    effect1 = {e[3] for e in run.of("effect", consumer=consumer) if e[4] == 1}
    again = {e[3] for e in run.of("delivered", consumer=consumer) if e[4] > 1}
    effects = run.effects(consumer)
    return {
        "in_flight": first - acked1,
        "redelivered": again,
        "effect_unacked": effect1 - acked1,
        "twice": {n for n in (effect1 - acked1) & again if effects[(consumer, n)] >= 2},
        "acked_again": {n for n in acked1 if effects[(consumer, n)] > 1},
        "lost": len(first - {n for _, n in effects}),
    }


def kill_ok(o: dict) -> bool:
    """Every in-flight message redelivered (but one whose ack was on its way may have
    landed first), nothing acked redelivered, each redelivered one whose effect had
    landed applied again (a duplicate), nothing lost."""
    no_effect = o["in_flight"] - o["effect_unacked"]
    return (
        no_effect <= o["redelivered"] <= o["in_flight"]
        and o["twice"] == o["redelivered"] & o["effect_unacked"]
        and not o["acked_again"]
        and o["lost"] == 0
    )


def freeze_to_redelivery(run: BrokerRun) -> np.ndarray:
    """Per killed consumer: its process froze (the real ``held`` effect; the model's
    crash) -> its first redelivery, seconds."""
    froze = {e[1]: e[5] for e in run.of("held")}
    if not froze:  # the model: one consumer, its crash
        froze = {c: t for c, _, t in run.killed}
    out = []
    for consumer, at in froze.items():
        again = [e[5] for e in run.of("delivered", consumer=consumer) if e[4] > 1]
        if again:
            out.append(min(again) - at)
    return np.asarray(out, dtype=float)


def _kill_said(outs: list[dict]) -> str:
    inflight = sum(len(o["in_flight"]) for o in outs)
    again, twice = sum(len(o["redelivered"]) for o in outs), sum(len(o["twice"]) for o in outs)
    lost = sum(o["lost"] for o in outs)
    return f"{again} of {inflight} in flight redelivered, {twice} applied twice, {lost} lost ({len(outs)} kills)"


def compare_kill(case: KillCase, real: BrokerRun, models: list[BrokerRun], alpha: float = 0.05) -> list[Check]:
    real_out = [kill_outcome(real, c) for c in case.names()]
    model_out = [kill_outcome(m, "c") for m in models]
    outcome = Check(
        case.name,
        "outcome",
        f"killed mid-batch ({case.batch} taken, {case.acked} acked, the next effect applied)",
        _kill_said(real_out),
        _kill_said(model_out),
        "in flight redelivered; applied again = effects in flight; none lost",
        all(map(kill_ok, real_out)) and all(map(kill_ok, model_out)),
    )
    freeze = _ks(
        case.name,
        "freeze",
        "freeze -> first redelivery",
        freeze_to_redelivery(real),
        _pool(freeze_to_redelivery, models),
        alpha,
    )
    lag, model_lag = real.redelivery_delays(), _pool(lambda m: m.redelivery_delays(), models)
    gap = float(np.median(lag) - np.median(model_lag))
    delay = Check(
        case.name,
        "delay",
        f"delivery -> redelivery (lease {case.lease:g} s)",
        f"median {np.median(lag):.3f} s, {np.min(lag):.3f} to {np.max(lag):.3f} s",
        f"median {np.median(model_lag):.3f} s",
        f"none before the lease (-{EARLY * 1000:.0f} ms); medians within {TOLERANCE * 1000:.0f} ms",
        float(np.min(lag)) >= case.lease - EARLY and abs(gap) <= TOLERANCE,
    )
    return [outcome, freeze, delay]


# -- case 3: a poison message -------------------------------------------------------------
def poison_schedule(run: BrokerRun, case: PoisonCase) -> tuple[list[float], list[tuple[int, float]]]:
    """The poison message's deliveries (seconds after its first), and what was done at
    the limit: (deliveries, seconds after the last delivery) of each limit event."""
    got = [t for _, t in run.deliveries("c", case.poison)]
    t0, last = (got[0], got[-1]) if got else (0.0, 0.0)
    return [round(t - t0, 3) for t in got], [(d, round(t - last, 3)) for _, n, d, t in run.limits if n == case.poison]


def _within(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= TOLERANCE for x, y in zip(a, b))


def compare_poison(case: PoisonCase, real: BrokerRun, model: BrokerRun, floors: dict, broker: str) -> list[Check]:
    (rt, rl), (mt, ml) = poison_schedule(real, case), poison_schedule(model, case)
    action = "the MAX_DELIVERIES advisory" if broker == "nats-jetstream" else "the client's dead letter"
    within = f"{TOLERANCE * 1000:.0f} ms"
    deliveries = Check(
        case.name,
        "deliveries",
        "deliveries of the poison message (s after the first)",
        str(rt),
        str(mt),
        f"count equal, each gap within {within}",
        _within(list(np.diff(rt)), list(np.diff(mt))) and len(rt) == case.max_deliver,
    )
    limit = Check(
        case.name,
        "limit",
        f"at the limit: {action} (deliveries, s after the last)",
        str(rl),
        str(ml),
        f"one, deliveries equal, time within {within}",
        len(rl) == len(ml) == 1 and rl[0][0] == ml[0][0] and _within([rl[0][1]], [ml[0][1]]),
    )
    return [
        deliveries,
        limit,
        _identity(case.name, "floor_limit", "ack floor at the limit", *floors["limit"]),
        _identity(case.name, "floor_after", "ack floor after one more message", *floors["after"]),
    ]


# -- case 4: out-of-order acks -------------------------------------------------------------
def compare_floor(name: str, real: list[int], model: list[int], order: list[int]) -> Check:
    return _identity(name, "floors", f"ack floor after each ack, acked in the order {order}", real, model)


# -- case 5: Poisson load --------------------------------------------------------------------
def compare_poisson(case: PoissonCase, real: BrokerRun, models: list[BrokerRun], alpha: float = 0.05) -> list[Check]:
    latency = _ks(
        case.name,
        "latency",
        f"publish -> handled, {case.consumers} consumers, {case.rate:g}/s, at most {case.in_flight} unacked each",
        real.handled_latencies(),
        _pool(lambda m: m.handled_latencies(), models),
        alpha,
    )
    most = ([real.most_in_flight(c) for c in case.names()], [models[0].most_in_flight(c) for c in case.names()])
    binding = Check(
        case.name,
        "binding",
        "most in flight at once, per consumer (the limit binds)",
        str(most[0]),
        str(most[1]),
        f"each {case.in_flight}",
        all(k == case.in_flight for k in most[0] + most[1]),
    )
    owed = case.messages * case.consumers
    return [latency, binding, _all_handled(case.name, "every message handled by every consumer", real, models, owed)]
