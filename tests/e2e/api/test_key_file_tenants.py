"""The key file's "tenants" object (rpc/auth.py): each tenant's daily LLM
token budget and its limit per user, every entry checked when the server
starts."""

from __future__ import annotations

import pytest

from nexus_grpc.rpc.auth import KeyFileError, KeyRing

KEYS = [{"key": "a-long-enough-key-0001", "name": "a"}]


def test_tenants_name_their_budgets_and_zero_is_none():
    ring = KeyRing.from_dict(
        {"tenants": {"acme": {"llm_tokens_per_day": 2_000_000}, "free": {"llm_tokens_per_day": 0},
                     "quiet": {}}, "keys": KEYS}  # fmt: skip
    )
    assert ring.tenant_budgets == {"acme": 2_000_000, "free": 0}
    assert ring.user_budgets == {}
    assert KeyRing.from_dict({"keys": KEYS}).tenant_budgets == {}


def test_a_tenant_names_the_most_one_users_work_may_spend_a_day():
    ring = KeyRing.from_dict(
        {"tenants": {"acme": {"llm_tokens_per_day": 2_000_000,
                              "llm_tokens_per_day_per_user": 200_000},
                     "open": {"llm_tokens_per_day_per_user": 0}}, "keys": KEYS}  # fmt: skip
    )
    assert ring.user_budgets == {"acme": 200_000, "open": 0}
    assert ring.tenant_budgets == {"acme": 2_000_000}


@pytest.mark.parametrize(
    ("tenants", "words"),
    [
        ([], '"tenants" must be an object'),
        ({"two words": {}}, "tenants['two words']: a tenant is 1 to 128"),
        ({"x" * 129: {}}, "a tenant is 1 to 128 printable characters"),
        ({"acme": 5}, "tenants['acme']: expected an object"),
        ({"acme": {"llm_token_per_day": 5}}, "unknown setting 'llm_token_per_day'"),
        ({"acme": {"llm_tokens_per_day": -1}}, "'llm_tokens_per_day' must be a whole number"),
        ({"acme": {"llm_tokens_per_day": 1.5}}, "'llm_tokens_per_day' must be a whole number"),
        ({"acme": {"llm_tokens_per_day": True}}, "'llm_tokens_per_day' must be a whole number"),
        ({"acme": {"llm_tokens_per_day": "100"}}, "'llm_tokens_per_day' must be a whole number"),
        (
            {"acme": {"llm_tokens_per_day_per_user": -5}},
            "'llm_tokens_per_day_per_user' must be a whole number of tokens, 0 or more"
            " (0: no limit per user)",
        ),
        (
            {"acme": {"llm_tokens_per_user": 5}},
            "unknown setting 'llm_tokens_per_user'; a tenant may set llm_tokens_per_day,"
            " llm_tokens_per_day_per_user",
        ),
    ],
)
def test_a_malformed_tenant_entry_is_refused(tenants, words):
    with pytest.raises(KeyFileError) as refused:
        KeyRing.from_dict({"tenants": tenants, "keys": KEYS}, source="keys.json")
    assert words in str(refused.value)
    assert str(refused.value).startswith("keys.json: ")
