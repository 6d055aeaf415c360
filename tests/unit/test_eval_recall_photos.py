"""`nexus-grpc eval recall --construction photos` without a server: what each
construction stores for a LoCoMo conversation, read from the requests the
evaluation sends (a stand-in stub records them). A shared photo's caption is
stored after the turn that shared it, the image search's query never, and an
odd last turn gets no reply and no caption. The conversation is
tests/photo_conversation.py's, which the e2e test reads too.

That the photos construction then finds what the README's text cannot, through
a real server, stays in tests/e2e/service/test_recall_eval_photos.py."""

from __future__ import annotations

from types import SimpleNamespace

from nexus_grpc.evaluation.locomo import NO_REPLY, load
from nexus_grpc.evaluation.recall import _store, with_photo
from tests.photo_conversation import conversation_file


class RecordingStub:
    """The memory service's stub as the evaluation calls it, keeping each episode."""

    def __init__(self) -> None:
        self.episodes: list[tuple[str, str]] = []

    async def CreateProject(self, request, **_call):
        return SimpleNamespace(id=1)

    async def CreateSession(self, request, **_call):
        return SimpleNamespace(id=1)

    async def CreateEpisode(self, request, **_call):
        self.episodes.append((request.user_message, request.ai_response))
        return SimpleNamespace(id=len(self.episodes))


async def stored(tmp_path, construction: str) -> list[tuple[str, str]]:
    stub = RecordingStub()
    await _store(stub, load(conversation_file(tmp_path)), "run", 5.0, [0], construction)  # type: ignore[arg-type]
    return stub.episodes


async def test_photos_construction_stores_the_caption_after_the_turn_that_shared_it(tmp_path):
    assert await stored(tmp_path, "photos") == [
        (
            "[1:56 pm on 8 May, 2023] Ann: Look what I finished this weekend!"
            " [shared a photo: a photo of a painting of a sunset over a lake]",
            "Bo: Wow, gorgeous colours",
        ),
        ("[1:56 pm on 8 May, 2023] Ann: We also adopted a beagle", NO_REPLY),
    ]


async def test_the_readme_construction_leaves_the_photos_out(tmp_path):
    readme = await stored(tmp_path, "readme")
    assert readme[0] == (
        "[1:56 pm on 8 May, 2023] Ann: Look what I finished this weekend!",
        "Bo: Wow, gorgeous colours",
    )
    assert not any("[shared a photo:" in u for u, _ in readme)


async def test_the_image_searchs_query_is_never_stored_and_an_odd_turn_has_no_reply(tmp_path):
    for construction in ("readme", "timed", "photos"):
        rows = await stored(tmp_path, construction)
        assert not any("sunrise" in u or "sunrise" in a for u, a in rows), construction
        assert rows[-1][1] == NO_REPLY, construction


def test_a_turn_without_a_photo_is_stored_as_it_is():
    assert with_photo("Bo: hi", "") == "Bo: hi"
    assert with_photo("Bo: hi", "a cat") == "Bo: hi [shared a photo: a cat]"
