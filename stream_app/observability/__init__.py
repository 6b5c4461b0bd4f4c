"""Logs and metrics: what an operator reads."""
