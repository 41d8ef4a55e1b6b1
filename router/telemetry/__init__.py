"""Telemetry of every routing decision: SQLite log, live event bus, Prometheus metrics."""
