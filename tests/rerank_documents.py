"""The query and four documents the rerank client's tests score: shared by its
rules on httpx's in-process transport (tests/unit/test_rerank_client_rules_requests.py)
and by each real server's answer over real HTTP
(tests/integration/rerank/test_rerank_client.py). Not a test module."""

from __future__ import annotations

DOCUMENTS = [
    "the weather in Lisbon is mild in winter",
    "postgres replication lag grew after the upgrade",
    "replication of the postgres primary to the replica",
    "a recipe for bread with flour, water and salt",
]
QUERY = "postgres replication"
