"""The reactor's figures, one module per topic (delivery, latency, lag, faults,
filters, clocks, sweeps)."""

from __future__ import annotations

from pathlib import Path


def save_report_figures(sim, out_dir, *, checked=None) -> list[Path]:
    """A run's standard figures (what the package template reads here):
    :func:`.delivery.save_report_figures`."""
    from .delivery import save_report_figures as save

    return save(sim, out_dir, checked=checked)
