"""`nexus-grpc eval recall --construction photos`: a shared photo's caption is
stored after the turn that shared it, beside the README's construction, and
found where the README's text cannot be, through a real server.

What each construction sends for a conversation is tested without a server in
tests/unit/test_eval_recall_photos.py; this test is the path's wiring. The
conversation both read is tests/photo_conversation.py's."""

from nexus_grpc.evaluation.recall import evaluate
from tests.photo_conversation import conversation_file


async def test_photos_construction_keeps_each_shared_photos_caption(harness, tmp_path):
    path = conversation_file(tmp_path)
    report = await evaluate(
        harness.target, [str(path)], modes=("keyword",), progress_out=None, construction="all"
    )
    assert report["constructions"] == ["readme", "timed", "photos"]
    # Only the caption says a painting was shared: the README's text cannot
    # answer, the photos construction can.
    assert report["modes"]["keyword"]["recall@10"] == 0.0
    assert report["modes"]["photos:keyword"]["recall@1"] == 1.0
    rows = await harness.app.db.read_sql(
        lambda c: c.execute("SELECT user_message, ai_response FROM episodes ORDER BY id").fetchall()
    )
    captioned = [tuple(r) for r in rows if "[shared a photo:" in r[0]]
    assert captioned == [
        (
            "[1:56 pm on 8 May, 2023] Ann: Look what I finished this weekend!"
            " [shared a photo: a photo of a painting of a sunset over a lake]",
            "Bo: Wow, gorgeous colours",
        )
    ]
    # The image search query is the data set's own note, never stored.
    assert not any("sunrise" in u or "sunrise" in a for u, a in rows)
    # The odd last turn has no reply and no caption to add.
    assert sum(1 for r in rows if r[1] == "(no reply)") == 3
