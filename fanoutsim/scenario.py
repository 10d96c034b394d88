"""Scenario files: ``load_scenario(path)`` reads a TOML file and returns the
scenario of the design it names (``design = "reactor" | "outbox" | "leases"``)."""
from fanoutsim.designs.reactor.scenario import ScenarioError, load_scenario, parse_scenario

__all__ = ["ScenarioError", "load_scenario", "parse_scenario"]
