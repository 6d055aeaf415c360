"""API-key authentication and per-user authorisation for every RPC.

A key file maps API keys to principals::

    {"tenants": {"acme": {"llm_tokens_per_day": 2000000,
                          "llm_tokens_per_day_per_user": 200000}},
     "keys": [
      {"key": "s3cret", "name": "orchestrator", "users": ["alice", "bob"], "admin": false},
      {"key_sha256": "9f86d0...", "name": "ops", "users": "*", "admin": true}
    ]}

``key`` is the key itself; ``key_sha256`` (hex) lets the file hold only the
digest.  Only SHA-256 digests are kept in memory, and a presented key is
compared against every digest with ``hmac.compare_digest``.  The optional
``"tenants"`` object sets a tenant's own daily LLM token budget
(domain/budgets.py; ``--llm-tokens-per-day`` is every other tenant's) and
the most the work for any one of its users may spend of it a day; a
mistake in it stops the start, as a mistake in a key does.

``AuthInterceptor`` runs before the service interceptor and every servicer
(``nexus_grpc.server.interceptor_chain`` sets the order): a call without a
known key is refused (UNAUTHENTICATED) before any of them runs; only the
shutdown gate comes first.
The identity comes from the key alone: after deserialisation every string
field named ``user_id`` anywhere in the request must name a user the
principal holds (PERMISSION_DENIED otherwise), and admin-only RPCs refuse
non-admin principals.  Health and reflection stay open.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from nexus_grpc.core import tenancy
from nexus_grpc.errors import ErrorInfo
from nexus_grpc.rpc.error_status import abort
from nexus_grpc.rpc.interception import HandlerInterceptor, refused
from nexus_grpc.rpc.requests import RequestObserver

log = logging.getLogger("nexus_grpc.rpc.auth")

#: Methods anyone may call, key or not.
OPEN_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")
#: Methods only admin principals may call.
ADMIN_METHODS = frozenset(
    {
        "/nexus.memory.v1.MemoryService/ReconcileIndex",
        # Writes server-assigned fields (times, history authors, counters) as
        # given: only an operator may make the record say what it did not see.
        "/nexus.memory.v1.MemoryService/RestoreProject",
        # Receipts of every user forgotten in a tenant (docs/privacy.md).
        "/nexus.memory.v1.MemoryService/ListErasures",
    }
)
#: Methods whose ``user_id`` the domain checks itself: a key that may not act
#: for the user is answered as for a user who holds nothing (NOT_FOUND), so
#: that forgetting and exporting tell no one whether another user exists.
DOMAIN_CHECKS_USER = frozenset(
    {
        "/nexus.memory.v1.MemoryService/ForgetUser",
        "/nexus.memory.v1.MemoryService/ExportUser",
    }
)
ALL_USERS = "*"
USER_FIELD = "user_id"
MAX_TENANT_CHARS = 128


def _is_token(value: str) -> bool:
    return 0 < len(value) <= MAX_TENANT_CHARS and value.isprintable() and " " not in value


@dataclass(frozen=True)
class Principal:
    name: str
    users: frozenset[str] | None  # None: every user
    admin: bool = False
    #: Whose projects, sessions and everything under them this key sees;
    #: the key's name unless the key file says otherwise.
    tenant: str = ""
    #: Which key of the key file this is (its position there): what per-key
    #: limits count by. Not part of equality: two rings read from one file
    #: name the same principal.
    key_id: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.tenant:
            object.__setattr__(self, "tenant", self.name)

    def may_act_for(self, user_id: str) -> bool:
        return self.admin or self.users is None or user_id in self.users

    def caller(self) -> tenancy.Caller:
        return tenancy.Caller(
            self.tenant, None if self.admin else self.users, all_tenants=self.admin
        )


_principal_var: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "principal", default=None
)


def current_principal() -> Principal | None:
    """The caller of the RPC being served; None when auth is off."""
    return _principal_var.get()


class KeyFileError(ValueError):
    pass


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


#: What a tenant's entry in the key file's "tenants" object may set.
TENANT_SETTINGS = ("llm_tokens_per_day", "llm_tokens_per_day_per_user")


class KeyRing:
    """Principals by SHA-256 digest of their API key, and the tenants' own
    budgets (``tenant_budgets``: LLM tokens per day, by tenant;
    ``user_budgets``: the most the work for one user may spend a day, by
    tenant)."""

    def __init__(
        self,
        entries: list[tuple[bytes, Principal]],
        tenant_budgets: dict[str, int] | None = None,
        user_budgets: dict[str, int] | None = None,
    ) -> None:
        if not entries:
            raise KeyFileError("the key file holds no keys; every call would be refused")
        self._entries = entries
        self.tenant_budgets = dict(tenant_budgets or {})
        self.user_budgets = dict(user_budgets or {})

    @classmethod
    def from_file(cls, path: str | Path) -> KeyRing:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise KeyFileError(f"cannot read key file {path}: {exc}") from exc
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "key file") -> KeyRing:
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise KeyFileError(f'{source}: expected {{"keys": [...]}}')
        entries: list[tuple[bytes, Principal]] = []
        seen: set[bytes] = set()
        names: dict[str, int] = {}
        for i, item in enumerate(data["keys"]):
            where = f"{source}: keys[{i}]"
            if not isinstance(item, dict):
                raise KeyFileError(f"{where}: expected an object")
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise KeyFileError(f"{where}: 'name' must be a non-empty string")
            if name in names:
                # The name is the principal in logs, refusals and memory
                # history: two keys under one name could not be told apart
                # there, whatever their tenants.
                raise KeyFileError(
                    f"{where}: name {name!r} is already the name of keys[{names[name]}];"
                    " each key needs a name of its own (it is how logs, errors and memory"
                    " history tell keys apart)"
                )
            names[name] = i
            digest = cls._entry_digest(item, where)
            if digest in seen:
                raise KeyFileError(f"{where}: duplicate key")
            seen.add(digest)
            users = item.get("users", [])
            if users == ALL_USERS:
                allowed: frozenset[str] | None = None
            elif isinstance(users, list) and all(isinstance(u, str) and u for u in users):
                allowed = frozenset(users)
            else:
                raise KeyFileError(f"{where}: 'users' must be \"*\" or a list of user ids")
            admin = item.get("admin", False)
            if not isinstance(admin, bool):
                raise KeyFileError(f"{where}: 'admin' must be true or false")
            tenant = item.get("tenant", name)
            if not isinstance(tenant, str) or not _is_token(tenant):
                raise KeyFileError(
                    f"{where}: 'tenant' must be 1 to {MAX_TENANT_CHARS} printable characters"
                    " with no spaces"
                )
            entries.append((digest, Principal(name, allowed, admin, tenant, key_id=f"keys[{i}]")))
        budgets = cls._tenant_budgets(data.get("tenants"), source)
        return cls(entries, budgets["llm_tokens_per_day"], budgets["llm_tokens_per_day_per_user"])

    @staticmethod
    def _tenant_budgets(tenants: Any, source: str) -> dict[str, dict[str, int]]:
        """The ``"tenants"`` object: each tenant's settings, all checked; by
        setting, each tenant's value."""
        budgets: dict[str, dict[str, int]] = {setting: {} for setting in TENANT_SETTINGS}
        if tenants is None:
            return budgets
        example = '{"tenants": {"NAME": {"llm_tokens_per_day": 1000000}}, "keys": [...]}'
        if not isinstance(tenants, dict):
            raise KeyFileError(f'{source}: "tenants" must be an object, as in {example}')
        for name, settings in tenants.items():
            where = f"{source}: tenants[{name!r}]"
            if not _is_token(name):
                raise KeyFileError(
                    f"{where}: a tenant is 1 to {MAX_TENANT_CHARS} printable characters with"
                    " no spaces"
                )
            if not isinstance(settings, dict):
                raise KeyFileError(f"{where}: expected an object, as in {example}")
            unknown = sorted(set(settings) - set(TENANT_SETTINGS))
            if unknown:
                # A misspelt setting would silently leave the tenant without it.
                raise KeyFileError(
                    f"{where}: unknown setting {unknown[0]!r}; a tenant may set"
                    f" {', '.join(TENANT_SETTINGS)}"
                )
            for setting, zero in (
                ("llm_tokens_per_day", "no budget for this tenant"),
                ("llm_tokens_per_day_per_user", "no limit per user"),
            ):
                if setting not in settings:
                    continue
                value = settings[setting]
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise KeyFileError(
                        f"{where}: {setting!r} must be a whole number of tokens,"
                        f" 0 or more (0: {zero})"
                    )
                budgets[setting][name] = value
        return budgets

    @staticmethod
    def _entry_digest(item: dict[str, Any], where: str) -> bytes:
        key, hashed = item.get("key"), item.get("key_sha256")
        if (key is None) == (hashed is None):
            raise KeyFileError(f"{where}: give exactly one of 'key' and 'key_sha256'")
        if key is not None:
            if not isinstance(key, str) or len(key) < 16:
                raise KeyFileError(f"{where}: 'key' must be a string of 16 characters or more")
            return _digest(key)
        try:
            digest = bytes.fromhex(hashed) if isinstance(hashed, str) else b""
        except ValueError:
            digest = b""
        if len(digest) != 32:
            raise KeyFileError(f"{where}: 'key_sha256' must be 64 hex digits")
        return digest

    def lookup(self, key: str) -> Principal | None:
        digest = _digest(key)
        found = None
        for candidate, principal in self._entries:  # no early exit: same work for every key
            if hmac.compare_digest(candidate, digest):
                found = principal
        return found


def bearer_key(metadata: Any) -> str | None:
    for name, value in metadata or ():
        if name != "authorization":
            continue
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        return None
    return None


# --- walking requests for user ids --------------------------------------------------

_HAS_USER: dict[str, bool] = {}


def _has_user_field(desc: Descriptor | Any, visiting: frozenset[str] = frozenset()) -> bool:
    cached = _HAS_USER.get(desc.full_name)
    if cached is not None:
        return cached
    if desc.full_name in visiting or desc.full_name.startswith("google.protobuf."):
        return False
    found = False
    for field in desc.fields:
        if field.name == USER_FIELD and field.type == FieldDescriptor.TYPE_STRING:
            found = True
        elif field.message_type is not None and _has_user_field(
            field.message_type, visiting | {desc.full_name}
        ):
            found = True
    if not visiting:  # only whole answers are cached
        _HAS_USER[desc.full_name] = found
    return found


def request_user_ids(message: Message) -> Iterator[str]:
    """Every non-empty string field named ``user_id`` in the message, recursively."""
    if not _has_user_field(message.DESCRIPTOR):
        return
    for field, value in message.ListFields():
        if field.name == USER_FIELD and field.type == FieldDescriptor.TYPE_STRING:
            values = value if _is_repeated(field) else (value,)
            yield from (v for v in values if v)
        elif field.message_type is not None and _has_user_field(field.message_type):
            if field.message_type.GetOptions().map_entry:
                for item in value.values():
                    if isinstance(item, Message):
                        yield from request_user_ids(item)
            elif _is_repeated(field):
                for item in value:
                    yield from request_user_ids(item)
            else:
                yield from request_user_ids(value)


def _is_repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated  # protobuf 7 dropped ``label``


# --- the interceptor ------------------------------------------------------------------


class _Call:
    """The method and the caller its key names (a plain slotted class: one is
    made on every call)."""

    __slots__ = ("method", "principal")

    def __init__(self, method: str, principal: Principal) -> None:
        self.method = method
        self.principal = principal


class AuthInterceptor(HandlerInterceptor[_Call]):
    def __init__(self, keys: KeyRing, observer: RequestObserver | None = None) -> None:
        self._keys = keys
        self._observer = observer or RequestObserver()

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method = details.method
        if method.startswith(OPEN_PREFIXES):
            return handler
        key = bearer_key(details.invocation_metadata)
        principal = self._keys.lookup(key) if key else None
        if principal is None:
            why = "missing API key" if key is None else "unknown API key"
            reason = "API_KEY_MISSING" if key is None else "API_KEY_INVALID"
            return self._refuse(
                handler, method, grpc.StatusCode.UNAUTHENTICATED, why, ErrorInfo(reason)
            )
        if method in ADMIN_METHODS and not principal.admin:
            rpc = method.rsplit("/", 1)[-1]
            return self._refuse(
                handler,
                method,
                grpc.StatusCode.PERMISSION_DENIED,
                f"{rpc} needs an admin key; {principal.name!r} is not one",
                ErrorInfo("ADMIN_KEY_REQUIRED", {"method": rpc, "api_key": principal.name}),
            )
        if handler.stream_stream:
            # Bidi-streaming: none of ours; refuse rather than skip the user check.
            return self._refuse(
                handler,
                method,
                grpc.StatusCode.PERMISSION_DENIED,
                "streaming requests unsupported",
                ErrorInfo("STREAMING_REQUESTS_UNSUPPORTED"),
            )
        return self.wrap(handler, _Call(method, principal))

    async def prologue(self, call: _Call, context: grpc.aio.ServicerContext, request: Any) -> None:
        """Binds the caller, and refuses a request acting for a user the key
        does not hold (PERMISSION_DENIED).

        As ``on_request``, every message of a client stream (whose prologue
        gets None) is checked the same way, as it arrives: a message acting for
        a user the key does not hold ends the call before the servicer sees it
        (what earlier messages already wrote stays: they were the key's to
        write)."""
        principal = call.principal
        _principal_var.set(principal)
        # The call's task owns this context: the binding ends with the call.
        tenancy.bind(principal.caller())
        user_id = (
            None if call.method in DOMAIN_CHECKS_USER else self._denied_user(request, principal)
        )
        if user_id is not None:
            self._record(call.method, grpc.StatusCode.PERMISSION_DENIED, time.perf_counter())
            log.warning("%s: %r may not act for user %r", call.method, principal.name, user_id)
            await abort(
                context,
                grpc.StatusCode.PERMISSION_DENIED,
                f"API key {principal.name!r} may not act for user {user_id!r}",
                (ErrorInfo("USER_NOT_PERMITTED", {"api_key": principal.name, "user_id": user_id}),),
            )

    on_request = prologue

    def _denied_user(self, request: Any, principal: Principal) -> str | None:
        if not isinstance(request, Message):
            return None
        for user_id in request_user_ids(request):
            if not principal.may_act_for(user_id):
                return user_id
        return None

    def _record(self, method: str, code: grpc.StatusCode, started: float) -> None:
        self._observer.observe(method, code, time.perf_counter() - started)

    def _refuse(
        self,
        handler: grpc.RpcMethodHandler,
        method: str,
        code: grpc.StatusCode,
        message: str,
        reason: ErrorInfo,
    ) -> grpc.RpcMethodHandler:
        async def refuse(context: grpc.aio.ServicerContext) -> None:
            self._record(method, code, time.perf_counter())
            log.info("%s %s: %s", method, code.name, message)
            await abort(context, code, message, (reason,))

        return refused(handler, refuse)
