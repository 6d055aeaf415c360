"""The LoCoMo conversation with a shared photo that the photos construction
of ``nexus-grpc eval recall`` is tested on, in both tiers that test it:
tests/unit/test_eval_recall_photos.py (what each construction stores, without
a server) and tests/e2e/service/test_recall_eval_photos.py (what it then finds
through a real server). One copy, so both read the same turns. Not a test
module; it imports nothing of the service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Ann shares a photo (caption: a painting of a sunset) with an image-search
#: query of its own, Bo answers, and Ann's last turn goes unanswered.
CONVERSATION: dict[str, Any] = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {
            "speaker": "Ann",
            "dia_id": "D1:1",
            "text": "Look what I finished this weekend!",
            "img_url": ["https://example.invalid/a.jpg"],
            "blip_caption": "a photo of a painting of a sunset over a lake",
            "query": "painting sunrise",
        },
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Wow, gorgeous colours"},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "We also adopted a beagle"},
    ],
    "qa": [{"question": "Who painted a sunset?", "evidence": ["D1:1"], "category": 4}],
}


def conversation_file(folder: Path) -> Path:
    """``CONVERSATION`` written as a LoCoMo file in ``folder``."""
    path = folder / "conv.json"
    path.write_text(json.dumps(CONVERSATION))
    return path
