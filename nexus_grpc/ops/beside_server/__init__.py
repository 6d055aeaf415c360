"""Operator tools that run beside a server, on its data directory or database."""
