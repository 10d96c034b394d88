"""The leases model against real brokers (work in progress)."""
