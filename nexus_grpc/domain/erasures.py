"""The erasure use cases: forget a user (ForgetUser), read an erasure's
progress or receipt (GetErasure, WatchErasure) and list the receipts
(ListErasures). What an erasure removes, and how, is domain/erasure.py.

Who may: an admin or ``*`` key of the tenant may forget any of its users, a
user key only its own user. Any other request, another tenant's keys
included, is answered exactly as for a user who holds nothing (NOT_FOUND),
so no key learns whether another user exists or was forgotten. An erasure
is read by the keys that may forget its user.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.erasure import Erasure, Target
from nexus_grpc.core.models import Page
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import erasure as erasing
from nexus_grpc.domain import paging
from nexus_grpc.domain import validation as v
from nexus_grpc.errors import InvalidArgument, NotFound

#: How often a watch looks again when no step woke it (a step committed by
#: another instance on a shared PostgreSQL wakes no one here).
WATCH_POLL_SECONDS = 1.0


def _nothing_held(user_id: str) -> NotFound:
    return NotFound(
        f"user {user_id!r} holds nothing here", resource_type="user", resource_name=user_id
    )


def _no_erasure(erasure_id: int) -> NotFound:
    return NotFound(
        f"erasure {erasure_id} does not exist", resource_type="erasure", resource_name=erasure_id
    )


class Erasures:
    def __init__(self, db: Database, signals: JobSignals, default_tenant: str) -> None:
        self.db = db
        self.signals = signals
        self.default_tenant = default_tenant
        # Set after every committed erasure step (the eraser's after_commit).
        self._changed = asyncio.Event()

    def committed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def forget_user(self, user_id: str, project_id: int, principal: str) -> Erasure:
        v.identifier("user_id", user_id)
        if not user_id:
            raise InvalidArgument("user_id is required", field="user_id")
        v.positive_id("project_id", project_id, required=False)
        tenant = tenancy.own(self.default_tenant)

        def start(uow: UnitOfWork) -> Erasure:
            if not tenancy.may_act_for(user_id):
                raise _nothing_held(user_id)
            if project_id and not uow.projects.exists(project_id, tenant):
                raise NotFound(
                    f"project {project_id} does not exist",
                    resource_type="project",
                    resource_name=project_id,
                )
            held = uow.erasures.user_holds(tenant, user_id, project_id)
            digest = erasing.user_digest(uow, tenant, user_id)
            running = uow.erasures.running_for(tenant, digest)
            if not (held.sessions or held.episodes or held.memories or held.memory_usage) and not (
                held.selections or running
            ):
                raise _nothing_held(user_id)
            return erasing.start(uow, Target(tenant, e.USER, user_id, project_id), principal)

        erasure = await self.db.write(start)
        self.signals.wake(jobs.ERASE)
        return replace(erasure, user_id=user_id)

    async def get(self, erasure_id: int) -> Erasure:
        v.positive_id("id", erasure_id)
        return await self.db.read(lambda c: self._visible(c, erasure_id))

    def _visible(self, uow: UnitOfWork, erasure_id: int) -> Erasure:
        """The erasure as this caller may read it: its tenant's keys that may
        forget its user (the user's id shown only to a key that names it, or
        while it runs); NOT_FOUND for anyone else."""
        erasure = uow.erasures.get(erasure_id)
        seen = tenancy.visible()
        if erasure is None or (seen is not None and erasure.tenant != seen):
            raise _no_erasure(erasure_id)
        if erasure.kind != e.USER:
            return erasure
        if erasure.user_id:
            if not tenancy.may_act_for(erasure.user_id):
                raise _no_erasure(erasure_id)
            return erasure
        if tenancy.may_act_for_all():
            return erasure
        caller = tenancy.caller()
        digest = uow.erasures.digest_of(erasure_id)
        for user in sorted(caller.users or ()) if caller is not None else ():
            if erasing.user_digest(uow, erasure.tenant, user, create=False) == digest:
                return replace(erasure, user_id=user)
        raise _no_erasure(erasure_id)

    async def watch(self, erasure_id: int) -> AsyncIterator[Erasure]:
        """The erasure now, then each time it changes, until it is DONE."""
        last = await self.get(erasure_id)
        yield last
        while not last.done:
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), WATCH_POLL_SECONDS)
            except TimeoutError:
                pass
            now = await self.get(erasure_id)
            if now != last:
                yield now
            last = now

    async def list_receipts(
        self, page_size: int, page_token: str, tenant_name: str, user_id: str
    ) -> Page[Erasure]:
        size = paging.page_size(page_size)
        before = paging.decode_token(page_token)
        if tenant_name:
            v.identifier("tenant", tenant_name)
        if user_id:
            v.identifier("user_id", user_id)
        tenant = tenancy.named(tenant_name, self.default_tenant)

        def read(uow: UnitOfWork) -> list[Erasure]:
            digest = erasing.user_digest(uow, tenant, user_id, create=False) if user_id else None
            rows = uow.erasures.page(tenant, digest, before, size + 1)
            # A receipt shows its user only to the request that named them.
            return [replace(r, user_id=user_id) if user_id else r for r in rows]

        return paging.page(await self.db.read(read), size)
