"""A List page that fits one response message (api/pages.py), called directly:
a page is cut where the next item would take the encoded response past the
message limit, always keeps one item, and its token then resumes after the
last item sent; a page that fits passes the domain's token on unchanged.

The walk of ListEpisodes' pages is the one tests/e2e/api/test_small_holes.py
made over the wire (12 episodes of ~180 kB under a 1 MiB limit), here on the
fakes of tests/fakes.py through the domain's list_episodes, as the servicer
calls it. Every List RPC's wiring (its servicer fits its page, on both
stores) stays in tests/e2e/api/test_list_pages.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from nexus_grpc.api import convert, pages
from nexus_grpc.core.models import Page
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import paging
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.fakes import FakeDatabase, FakeUnitOfWork

ITEM = 1_000  # characters of each test item's name


@dataclass
class Row:
    id: int


def message(row: Row) -> memory_pb2.Project:
    return memory_pb2.Project(id=row.id, name="x" * ITEM)


def one_size() -> int:
    """What one item takes in the response: itself and its tag and length."""
    return message(Row(1)).ByteSize() + pages.PER_ITEM_BYTES


def room_for(n: int) -> int:
    """The smallest limit that fits ``n`` items beside the envelope."""
    return pages.ENVELOPE_BYTES + n * one_size()


def test_no_limit_keeps_the_whole_page():
    messages = [message(Row(i)) for i in range(1, 6)]
    assert pages.fit_count(messages, 0) == 5
    assert pages.fit_count(messages, -1) == 5


def test_a_page_is_cut_where_the_next_item_would_pass_the_limit():
    messages = [message(Row(i)) for i in range(1, 6)]
    assert pages.fit_count(messages, room_for(3)) == 3
    assert pages.fit_count(messages, room_for(3) - 1) == 2
    assert pages.fit_count(messages, room_for(5)) == 5


def test_a_page_keeps_one_item_even_when_that_one_is_over_the_limit():
    messages = [message(Row(i)) for i in range(1, 4)]
    assert pages.fit_count(messages, 1) == 1
    assert pages.fit_count(messages, pages.ENVELOPE_BYTES) == 1


def test_a_cut_page_resumes_after_the_last_item_sent():
    page = Page(items=[Row(9), Row(7), Row(4), Row(2)], next_token=paging.encode_token(2))
    items, token = pages.fitted(page, message, room_for(2))
    assert [m.id for m in items] == [9, 7]
    assert paging.decode_token(token) == 7


def test_a_page_that_fits_passes_the_domains_token_on():
    more = paging.encode_token(4)
    items, token = pages.fitted(Page(items=[Row(9), Row(4)], next_token=more), message, room_for(2))
    assert [m.id for m in items] == [9, 4] and token == more
    items, token = pages.fitted(Page(items=[Row(3)], next_token=""), message, room_for(2))
    assert [m.id for m in items] == [3] and token == ""


LIMIT = 1024 * 1024


async def test_a_page_of_large_episodes_fits_the_message_limit_and_pages_on():
    """test_small_holes.py's walk: ListEpisodes at the default page size."""
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "t1").id
    conversations = Conversations(FakeDatabase(uow), JobSignals())
    big = "x" * 90_000
    created = [
        (await conversations.create_episode(session, f"{i} {big}", big, {}, "")).id
        for i in range(12)
    ]
    # 12 episodes of ~180 kB are ~2 MB: the default page (50) cannot be one message.
    seen: list[int] = []
    token, count = "", 0
    while True:
        page = await conversations.list_episodes(session, 0, token)
        items, token = pages.fitted(page, convert.episode, LIMIT)
        response = memory_pb2.ListEpisodesResponse(episodes=items, next_page_token=token)
        assert response.ByteSize() <= LIMIT
        assert items, "a page must hold at least one episode"
        seen += [e.id for e in items]
        count += 1
        if not token:
            break
    assert count > 1
    assert seen == sorted(created, reverse=True)  # every one, once, newest first
