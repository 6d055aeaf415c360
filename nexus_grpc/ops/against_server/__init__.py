"""Operator tools that run against a running server, over gRPC."""
