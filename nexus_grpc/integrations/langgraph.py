"""LangGraph's long-term memory store on nexus memories: ``NexusStore``.

``pip install 'nexus-grpc[langgraph]'``. A ``BaseStore``, sync and async,
whose items are memories of one nexus project (``project=``, found by name
in the API key's tenant or created on first use)::

    store = NexusStore(target="127.0.0.1:50051", project="assistant")
    graph = builder.compile(store=store)
    ...
    store.put(("memories", user_id), "food", {"likes": "ramen"})
    store.search(("memories", user_id), query="what does the user eat?")

**Namespaces.** A namespace's user owns its items: they are USER memories
of that user, never shown to another; an item of no user is a PROJECT
memory, shared by the project. Which label names the user is
``user_position``:

- ``"auto"`` (the default) takes LangGraph's two common layouts as they
  are: in a two-label namespace with ``"memories"`` on one side, the other
  label is the user (``("memories", user_id)`` and ``(user_id,
  "memories")`` alike); a one-label namespace (``("docs",)``) is the
  project's. Any other namespace (two labels neither or both of which are
  ``"memories"``, three or more labels) is refused with
  ``InvalidNamespaceError`` naming the setting, never guessed.
- an index (``0``, ``1``...): the label there names the user; a namespace
  too short to reach it is the project's.
- ``None``: every item is the project's.

**Reading without a user.** A search or a listing whose prefix names no user
(``("memories",)``, ``()``, ``"*"`` where the user goes, a ``suffix``)
reads the project's items and those of every user the API key may act for
that holds memories in the project (``GetProjectStats.users``): every user
for a ``"*"`` key, an admin key or a server without auth, the key's own
users otherwise, as LangGraph's own stores list every namespace they hold.
An item is listed only where ``get`` finds it (its namespace names the user
it is stored under). Past the 100 users ``GetProjectStats`` names, such a
read is refused (``ValueError``) rather than answered in part.

**Items.** An item is a LONGTERM memory of the store's ``agent_id`` (default
empty). Its ``metadata["langgraph"]`` holds the namespace, the key and the
value as JSON text, so the value round-trips exactly (a JSON value in, the
same value out; anything ``json.dumps`` cannot write, or NaN, is refused).
Its ``content`` is the text the item is found by: the value's fields named
by ``index`` (LangGraph's paths: ``"text"``, ``"a.b"``, ``"items[*].name"``;
``None``: the store's ``index_fields``, default the whole value as JSON);
its ``title`` that text's first line. ``index=False`` indexes nothing of the
value: title and content are the key alone, and a query search never
returns the item (as LangGraph's ``PostgresStore`` leaves it out), while
``get``, listings and searches without a query do. So the memories a graph
stores are memories like any other: ``SelectMemories``, the MCP tools and
the console see them. ``created_at``/``updated_at`` are the memory's
create/update times. A key is found through a memory ``request_id`` derived
from the project, owner, namespace and key, so two writers putting a new key
at once make one memory.

**Search.** With ``query``: when the prefix names the user (or
``user_position=None``), nexus's hybrid search (keyword and semantic, fused;
``SearchItem.score`` is its 0..1 score) over that owner's memories; when it
names none, a semantic search of each owner's (``score`` is the cosine
similarity, the one score comparable across separate searches), merged
best first. At most 100 ranked candidates an owner, kept when their
namespace starts with the prefix and their value passes ``filter``. Without
``query``, the items under the prefix, newest update first. ``filter``
applies to the stored value as LangGraph's own stores apply it: each key's
value equal (nested objects and lists compared whole), or operators
``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``. ``limit`` is at most
100 for a query search.

**Bounds.** An item's namespace, key and value take at most 64,000 bytes as
JSON (the server's limit on a memory's metadata, ``MAX_ITEM_BYTES``); a
larger value is refused with ``ValueError`` before any call. A listing reads
each owner's memories in pages of 1,000, and an owner holds at most the
server's cap (1,000 memories outside the ARCHIVE tier, per project, agent
and user): beyond it ``put`` is refused with the server's
``FAILED_PRECONDITION`` (a ``RuntimeError``). TTLs are not supported
(``supports_ttl = False``).

**Errors.** A bad namespace is LangGraph's ``InvalidNamespaceError``; a value
that is not JSON or too large, a key that is not a string, a user label the
server would refuse are ``ValueError``, raised before any call, so a refused
batch writes nothing. A refusal by the server keeps its message and status
(``nexus_grpc.integrations.conventional_errors``). A batch runs its operations in order;
a server refusal stops it there, after the writes before it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from google.protobuf import struct_pb2
from google.protobuf.field_mask_pb2 import FieldMask

from nexus_grpc.client import NexusAlreadyExists, NexusClient, NexusNotFound
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.adapter_client import (
    MAX_METADATA_BYTES,
    AdapterClient,
    check_label,
    one_line,
)

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
    from langgraph.store.base.embed import get_text_at_path, tokenize_path

    from nexus_grpc.integrations.namespace_owners import (
        AUTO,
        EVERY,
        Every,
        NamespaceOwners,
        Owner,
        UserPosition,
    )
except ImportError as exc:  # pragma: no cover - exercised by tests/e2e/frameworks' light install
    raise ImportError(
        "nexus_grpc.integrations.langgraph needs LangGraph: pip install 'nexus-grpc[langgraph]'"
    ) from exc

__all__ = ["AUTO", "MAX_ITEM_BYTES", "NexusStore"]

#: The metadata key under which an item's namespace, key and value live.
META = "langgraph"
#: The most bytes an item's namespace, key and value take as JSON.
MAX_ITEM_BYTES = MAX_METADATA_BYTES
_PAGE = 1000
_MAX_QUERY_HITS = 100
_MAX_TITLE_CHARS = 500
_MAX_CONTENT_CHARS = 100_000
# The owners one read that names no user reads at once.
_OWNERS_AT_ONCE = 8
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
Namespace = tuple[str, ...]
T = TypeVar("T")


@dataclass(frozen=True)
class _Stored:
    memory_id: int
    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    indexed: bool = True

    def item(self) -> Item:
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )

    def search_item(self, score: float | None) -> SearchItem:
        return SearchItem(
            self.namespace, self.key, self.value, self.created_at, self.updated_at, score
        )


def _when(ts: Any) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)  # type: ignore[no-any-return]


def _decode(memory: memory_pb2.Memory) -> _Stored | None:
    """The item a memory holds; None for a memory the store did not write."""
    entry = memory.metadata.fields.get(META)
    if entry is None or entry.WhichOneof("kind") != "struct_value":
        return None
    fields = entry.struct_value.fields
    try:
        namespace = tuple(v.string_value for v in fields["namespace"].list_value.values)
        key = fields["key"].string_value
        value = json.loads(fields["value"].string_value)
    except (KeyError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    indexed = "index" not in fields or fields["index"].bool_value
    created = _when(memory.create_time)
    updated = _when(memory.update_time) if memory.HasField("update_time") else created
    return _Stored(memory.id, namespace, key, value, created, updated, indexed)


def _json(value: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a store value must be JSON (an object of JSON values): {exc}") from None


def _entry(namespace: Namespace, key: str, value: Mapping[str, Any], index: Any) -> dict[str, Any]:
    """What ``metadata["langgraph"]`` holds for an item."""
    entry: dict[str, Any] = {"namespace": list(namespace), "key": key, "value": _json(value)}
    if index is False:
        entry["index"] = False
    return entry


def _check_size(op: PutOp) -> None:
    assert op.value is not None
    # Measured as the server measures a memory's metadata (json.dumps, ASCII).
    size = len(json.dumps({META: _entry(op.namespace, op.key, op.value, op.index)}))
    if size > MAX_ITEM_BYTES:
        raise ValueError(
            f"the value put at {op.namespace} key {op.key!r} is too large: NexusStore keeps an"
            f" item's namespace, key and value in one nexus memory's metadata, at most"
            f" {MAX_ITEM_BYTES:,} bytes as JSON, and this item takes {size:,}"
        )


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter rule (as its own stores apply it) for one key."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        if not isinstance(value, dict):
            return False
        return all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    try:
        left, right = float(value), float(operand)
    except (TypeError, ValueError):
        return False
    if op == "$gt":
        return left > right
    if op == "$gte":
        return left >= right
    if op == "$lt":
        return left < right
    return left <= right  # $lte: the operators were checked before any call


def _check_filter(where: Any, path: str = "filter") -> None:
    if isinstance(where, dict):
        for k, v in where.items():
            if not isinstance(k, str):
                raise ValueError(f"{path} keys must be strings, got {k!r}")
            if k.startswith("$") and k not in _OPERATORS:
                raise ValueError(
                    f"{path} has unknown operator {k!r}; the operators are {', '.join(_OPERATORS)}"
                )
            _check_filter(v, f"{path}.{k}")


def _namespace_matches(namespace: Namespace, condition: MatchCondition) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


async def _per_owner(
    owners: Sequence[Owner], read: Callable[[Owner], Awaitable[list[T]]]
) -> list[T]:
    """``read(owner)`` for each owner, at most _OWNERS_AT_ONCE at a time, joined in order."""
    gate = asyncio.Semaphore(_OWNERS_AT_ONCE)

    async def one(owner: Owner) -> list[T]:
        async with gate:
            return await read(owner)

    return [found for page in await asyncio.gather(*map(one, owners)) for found in page]


class NexusStore(BaseStore):
    """A LangGraph ``BaseStore`` on the memories of one nexus project; see the module."""

    supports_ttl = False
    __slots__ = ("_conn", "_ids", "_layout", "agent_id", "index_fields")

    def __init__(
        self,
        client: NexusClient | None = None,
        *,
        target: str | None = None,
        api_key: str | None = None,
        client_options: Mapping[str, Any] | None = None,
        project: str,
        user_position: UserPosition = AUTO,
        agent_id: str = "",
        index_fields: Sequence[str] | None = None,
    ) -> None:
        """``client`` (a ``NexusClient``), or ``target`` with ``api_key`` and
        ``client_options`` (``NexusClient``'s other keywords: TLS files,
        ``timeout``, ``retry``...); ``project`` by name. ``user_position`` is
        the namespace label that names the user (``"auto"``: the label beside
        ``"memories"`` in a two-label namespace; None: none does);
        ``agent_id`` the owner agent of every item; ``index_fields`` the
        value's paths an item is found by, unless its ``put`` names others."""
        self._layout = NamespaceOwners(user_position)
        self._conn = AdapterClient(
            client=client,
            target=target,
            api_key=api_key,
            client_options=client_options,
            project=project,
            made_by="nexus-grpc's LangGraph store",
        )
        self.agent_id = check_label("agent_id", agent_id, required=False)
        self.index_fields = list(index_fields) if index_fields is not None else None
        for path in self.index_fields or ():
            tokenize_path(path)
        # (namespace, key) -> memory id, as last seen: a hint that saves a
        # listing, always checked by the call that uses it.
        self._ids: dict[tuple[Namespace, str], int] = {}

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Stops the thread the synchronous methods run on (and its channel)."""
        self._conn.close()

    async def aclose(self) -> None:
        """Closes the channels this store opened (a client passed in stays open)."""
        await self._conn.aclose()

    def __enter__(self) -> NexusStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> NexusStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- BaseStore -------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        checked = self._checked(ops)
        return self._conn.run(lambda client: self._run(client, checked))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        checked = self._checked(ops)
        return await self._conn.call(lambda client: self._run(client, checked))

    # --- checks, before any call -------------------------------------------------------

    def _checked(self, ops: Iterable[Op]) -> list[Op]:
        out = list(ops)
        for op in out:
            if isinstance(op, PutOp):
                self._check_namespace(op.namespace, writing=True)
                if not isinstance(op.key, str):
                    raise ValueError(f"a store key must be a string, got {op.key!r}")
                if op.value is not None:
                    if not isinstance(op.value, Mapping):
                        raise ValueError(f"a store value must be a mapping, got {op.value!r}")
                    _json(op.value)
                    if op.index not in (None, False):
                        for path in op.index or ():
                            tokenize_path(path)
                    _check_size(op)
                if op.ttl is not None:
                    raise NotImplementedError("NexusStore does not support TTLs")
            elif isinstance(op, GetOp):
                self._check_namespace(op.namespace)
                if not isinstance(op.key, str):
                    raise ValueError(f"a store key must be a string, got {op.key!r}")
            elif isinstance(op, SearchOp):
                self._check_namespace(op.namespace_prefix, prefix=True)
                _check_filter(op.filter)
                if op.query and not 0 <= op.offset + op.limit <= _MAX_QUERY_HITS:
                    raise ValueError(
                        f"a query search reaches at most {_MAX_QUERY_HITS} ranked items;"
                        f" offset + limit is {op.offset + op.limit}"
                    )
                if op.limit < 0 or op.offset < 0:
                    raise ValueError("limit and offset must not be negative")
            elif isinstance(op, ListNamespacesOp):
                if op.limit < 0 or op.offset < 0:
                    raise ValueError("limit and offset must not be negative")
            else:
                raise ValueError(f"unknown store operation {op!r}")
        return out

    def _check_namespace(
        self, namespace: Namespace, *, writing: bool = False, prefix: bool = False
    ) -> None:
        if not isinstance(namespace, tuple):
            raise InvalidNamespaceError(f"a namespace must be a tuple, got {namespace!r}")
        if writing and not namespace:
            raise InvalidNamespaceError("a namespace must not be empty")
        if writing and namespace[0] == "langgraph":
            raise InvalidNamespaceError(f'the root label "langgraph" is reserved: {namespace}')
        for label in namespace:
            if not isinstance(label, str):
                raise InvalidNamespaceError(f"namespace labels must be strings: {namespace}")
            if not label:
                raise InvalidNamespaceError(f"namespace labels must not be empty: {namespace}")
            if "." in label:
                raise InvalidNamespaceError(f"namespace labels must not contain '.': {namespace}")
        user = self._layout.reached_by(namespace) if prefix else self._layout.of(namespace)
        if isinstance(user, str):
            try:
                check_label("the namespace's user label", user)
            except ValueError as exc:
                raise InvalidNamespaceError(str(exc)) from None

    # --- the mapping -------------------------------------------------------------------

    @property
    def user_position(self) -> UserPosition:
        """The namespace label that names the user (``namespace_owners``)."""
        return self._layout.user_position

    def _scope(self, project_id: int, user: Owner) -> memory_pb2.MemoryScope:
        return memory_pb2.MemoryScope(
            project_id=project_id,
            user_id=user or "",
            agent_id=self.agent_id,
            include_archived=True,
        )

    @staticmethod
    def _kind(user: Owner) -> memory_pb2.MemoryKind.ValueType:
        return memory_pb2.MEMORY_KIND_USER if user else memory_pb2.MEMORY_KIND_PROJECT

    def _request_id(self, project_id: int, user: Owner, namespace: Namespace, key: str) -> str:
        where = json.dumps([project_id, user or "", self.agent_id, list(namespace), key])
        return "langgraph-" + hashlib.sha256(where.encode()).hexdigest()[:40]

    def _text(self, value: Mapping[str, Any], index: Any) -> str:
        paths = index if index is not None else (self.index_fields or ["$"])
        texts = [t for path in paths for t in get_text_at_path(value, path) if t.strip()]
        text = "\n".join(texts) or json.dumps(dict(value), ensure_ascii=False, sort_keys=True)
        return text[:_MAX_CONTENT_CHARS]

    def _memory(self, project_id: int, op: PutOp, value: Mapping[str, Any]) -> memory_pb2.Memory:
        user = self._layout.of(op.namespace)
        key_line = one_line(op.key)[:_MAX_TITLE_CHARS].strip()
        if op.index is False:
            # Nothing of the value is indexed: the memory reads as its key.
            content = op.key[:_MAX_CONTENT_CHARS].strip() or "item"
            title = key_line
        else:
            content = self._text(value, op.index)
            title = one_line(content)[:_MAX_TITLE_CHARS].strip() or key_line
        metadata = struct_pb2.Struct()
        metadata.update({META: _entry(op.namespace, op.key, value, op.index)})
        return memory_pb2.Memory(
            kind=self._kind(user),
            title=title or "item",
            content=content,
            tier=memory_pb2.TIER_LONGTERM,
            project_id=project_id,
            agent_id=self.agent_id,
            user_id=user or "",
            metadata=metadata,
        )

    # --- running a batch -----------------------------------------------------------------

    async def _run(self, client: NexusClient, ops: list[Op]) -> list[Result]:
        project_id = await self._conn.project_id(client)
        results: list[Result] = []
        # Reads between two writes run at once; writes run in order, so a read
        # sees every write before it in the batch.
        reads: list[tuple[int, Any]] = []

        async def drain() -> None:
            if reads:
                answers = await asyncio.gather(*(pending for _, pending in reads))
                for (at, _), answer in zip(reads, answers, strict=True):
                    results[at] = answer
                reads.clear()

        for op in ops:
            results.append(None)
            if isinstance(op, PutOp):
                await drain()
                await self._put(client, project_id, op)
            elif isinstance(op, GetOp):
                reads.append((len(results) - 1, self._get(client, project_id, op)))
            elif isinstance(op, SearchOp):
                reads.append((len(results) - 1, self._search(client, project_id, op)))
            else:
                assert isinstance(op, ListNamespacesOp)
                reads.append((len(results) - 1, self._list_namespaces(client, project_id, op)))
        await drain()
        return results

    async def _owners(
        self, client: NexusClient, project_id: int, reach: Owner | Every
    ) -> list[Owner]:
        """The owners a read reaches: one, or (EVERY) the project and each user
        the key may act for that holds memories in the project."""
        if not isinstance(reach, Every):
            return [reach]
        if self.user_position is None:
            return [None]  # no item of this store is a user's
        stats = await client.get_project_stats(
            project_id=project_id, read_mask=FieldMask(paths=["users", "user_count"])
        )
        if stats.user_count > len(stats.users):
            raise ValueError(
                f"project {self._conn.project!r} has {stats.user_count} users with memories;"
                f" a NexusStore search or listing that names no user reads at most the"
                f" {len(stats.users)} GetProjectStats names: name the user in the namespace"
                " prefix"
            )
        return [None, *(u.user_id for u in stats.users)]

    async def _listing(self, client: NexusClient, project_id: int, owner: Owner) -> list[_Stored]:
        """Every item of one owner (the project's, or a user's), page by page."""
        items: list[_Stored] = []
        token = ""
        while True:
            page = await client.list_memories(
                scope=self._scope(project_id, owner),
                kind=self._kind(owner),
                page_size=_PAGE,
                page_token=token,
            )
            for memory in page.memories:
                stored = _decode(memory)
                # Only where get finds it: stored under the owner its namespace names.
                if stored is not None and self._layout.placed(stored.namespace) == owner:
                    items.append(stored)
                    self._ids[(stored.namespace, stored.key)] = stored.memory_id
            token = page.next_page_token
            if not token:
                return items

    async def _listings(
        self, client: NexusClient, project_id: int, reach: Owner | Every
    ) -> list[_Stored]:
        owners = await self._owners(client, project_id, reach)
        return await _per_owner(owners, lambda owner: self._listing(client, project_id, owner))

    async def _find(
        self, client: NexusClient, project_id: int, namespace: Namespace, key: str
    ) -> _Stored | None:
        user = self._layout.of(namespace)
        known = self._ids.get((namespace, key))
        if known:
            try:
                memory = await client.get_memory(id=known, user_id=user or "")
            except NexusNotFound:
                memory = None
            stored = _decode(memory) if memory is not None else None
            if stored is not None and (stored.namespace, stored.key) == (namespace, key):
                return stored
            self._ids.pop((namespace, key), None)
        for stored in await self._listing(client, project_id, user):
            if stored.namespace == namespace and stored.key == key:
                return stored
        return None

    async def _get(self, client: NexusClient, project_id: int, op: GetOp) -> Item | None:
        stored = await self._find(client, project_id, op.namespace, op.key)
        return stored.item() if stored is not None else None

    async def _put(self, client: NexusClient, project_id: int, op: PutOp) -> None:
        user = self._layout.of(op.namespace)
        if op.value is None:
            stored = await self._find(client, project_id, op.namespace, op.key)
            if stored is not None:
                try:
                    await client.delete_memory(id=stored.memory_id, user_id=user or "")
                except NexusNotFound:
                    pass  # deleted meanwhile: what a delete wants
                self._ids.pop((op.namespace, op.key), None)
            return
        memory = self._memory(project_id, op, op.value)
        known = self._ids.get((op.namespace, op.key))
        if known and await self._update(client, known, memory, user, op):
            return
        try:
            # The key's request_id makes this a create only where the key is
            # new; the same value again is answered with the memory as it is.
            created = await client.create_memory(
                memory=memory, request_id=self._request_id(project_id, user, op.namespace, op.key)
            )
            self._ids[(op.namespace, op.key)] = created.id
            return
        except NexusAlreadyExists:
            pass  # the key holds another value: update it
        stored = await self._find(client, project_id, op.namespace, op.key)
        if stored is None or not await self._update(client, stored.memory_id, memory, user, op):
            raise RuntimeError(
                f"the memory holding {op.namespace}/{op.key} could not be found to update it"
            )

    async def _update(
        self,
        client: NexusClient,
        memory_id: int,
        memory: memory_pb2.Memory,
        user: Owner,
        op: PutOp,
    ) -> bool:
        """Writes ``memory`` over ``memory_id``; False when that id is gone."""
        change = memory_pb2.Memory()
        change.CopyFrom(memory)
        change.id = memory_id
        try:
            await client.update_memory(
                memory=change,
                update_mask=FieldMask(paths=["title", "content", "metadata"]),
                user_id=user or "",
            )
        except NexusNotFound:
            self._ids.pop((op.namespace, op.key), None)
            return False
        self._ids[(op.namespace, op.key)] = memory_id
        return True

    def _selected(self, stored: _Stored, op: SearchOp) -> bool:
        prefix = op.namespace_prefix
        if stored.namespace[: len(prefix)] != prefix:
            return False
        return all(_matches(stored.value.get(k), v) for k, v in (op.filter or {}).items())

    async def _ranked(
        self,
        client: NexusClient,
        project_id: int,
        owner: Owner,
        op: SearchOp,
        mode: memory_pb2.SearchMode.ValueType,
    ) -> list[tuple[float, _Stored]]:
        """One owner's items a query finds, with their scores, best first."""
        assert op.query
        found: list[tuple[float, _Stored]] = []
        async for hit in client.search_memories(
            query=op.query, scope=self._scope(project_id, owner), limit=_MAX_QUERY_HITS, mode=mode
        ):
            stored = _decode(hit.memory)
            if stored is None or hit.memory.kind != self._kind(owner) or not stored.indexed:
                continue
            if self._layout.placed(stored.namespace) == owner and self._selected(stored, op):
                found.append((hit.score, stored))
        return found

    async def _search(self, client: NexusClient, project_id: int, op: SearchOp) -> list[SearchItem]:
        reach = self._layout.reached_by(op.namespace_prefix)
        if op.query:
            owners = await self._owners(client, project_id, reach)
            # One owner: nexus's hybrid ranking. Several: a search of each, whose
            # scores must compare across searches: cosine similarity does, the
            # fused score (relative to each search's best) does not.
            mode = (
                memory_pb2.SEARCH_MODE_SEMANTIC
                if isinstance(reach, Every)
                else memory_pb2.SEARCH_MODE_HYBRID
            )
            merged = await _per_owner(
                owners, lambda owner: self._ranked(client, project_id, owner, op, mode)
            )
            merged.sort(key=lambda hit: hit[0], reverse=True)
            kept = merged[op.offset : op.offset + op.limit]
            return [stored.search_item(score) for score, stored in kept]
        listed = await self._listings(client, project_id, reach)
        items = [s for s in listed if self._selected(s, op)]
        items.sort(key=lambda s: (s.updated_at, s.memory_id), reverse=True)
        return [s.search_item(None) for s in items[op.offset : op.offset + op.limit]]

    async def _list_namespaces(
        self, client: NexusClient, project_id: int, op: ListNamespacesOp
    ) -> list[Namespace]:
        conditions = op.match_conditions or ()
        named = {
            self._layout.reached_by(c.path) for c in conditions if c.match_type == "prefix"
        } - {EVERY}
        # A listing reaches one owner when a prefix names it; two prefixes
        # naming two different owners match nothing.
        if len(named) > 1:
            return []
        reach: Owner | Every = next(iter(named)) if named else EVERY
        found: set[Namespace] = set()
        for stored in await self._listings(client, project_id, reach):
            namespace = stored.namespace
            if all(_namespace_matches(namespace, c) for c in conditions):
                if op.max_depth is not None:
                    namespace = namespace[: op.max_depth]
                found.add(namespace)
        return sorted(found)[op.offset : op.offset + op.limit]
