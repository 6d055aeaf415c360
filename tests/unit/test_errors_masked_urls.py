"""A URL with a credential is shown masked (core/redact.py): the status, the
log and every refusal's text go through ``mask_url`` or ``scrub``. Moved as
it was from tests/e2e/api/test_credentials.py, which keeps the walks over a
real server's answers and log."""

from __future__ import annotations

import pytest

from nexus_grpc.core.redact import mask_url, scrub


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:secret@host:11434", "http://***@host:11434"),
        ("https://:tok@llm.lan/v1", "https://***@llm.lan/v1"),
        ("http://TOKEN777@rerank.lan/v1", "http://***@rerank.lan/v1"),
        ("postgresql://nexus:s3cret@db.lan:5432/nexus", "postgresql://***@db.lan:5432/nexus"),
        ("postgresql://nexus@db.lan/nexus?password=s3cret&sslmode=require",
         "postgresql://***@db.lan/nexus?password=***&sslmode=***"),
        ("https://r.lan/v1?code=c0de&sig=s1g&x-api-key=k3y&subscription-key=sub",
         "https://r.lan/v1?code=***&sig=***&x-api-key=***&subscription-key=***"),
        ("http://u:p@[::1]:6333", "http://***@[::1]:6333"),
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
        ("postgresql://db.lan/nexus", "postgresql://db.lan/nexus"),
        ("", ""),
    ],
)  # fmt: skip
def test_every_url_is_masked_the_same_way(url, shown):
    assert mask_url(url) == shown
    # A URL a library quotes inside a message is masked the same way.
    assert scrub(f"cannot reach {url}: refused") == f"cannot reach {shown}: refused"
