"""Words common to a scope are estimated from a sample and left out of queries."""

from __future__ import annotations

from nexus_grpc.domain.retrieval.common_terms import (
    MIN_SAMPLE,
    TTL_SECONDS,
    ScopeVocabulary,
    common_words,
    without,
)
from nexus_grpc.domain.retrieval.keyword_query import match_expression


def test_a_name_on_most_episodes_is_common_and_a_topic_word_is_not():
    texts = [f"Caroline: day {i} was fine" for i in range(40)] + ["Melanie: I painted a sunrise"]
    common = common_words(texts)
    assert "caroline" in common
    assert "sunrise" not in common and "painted" not in common


def test_too_small_a_sample_says_nothing_is_common():
    assert common_words(["Caroline: hi"] * (MIN_SAMPLE - 1)) == frozenset()
    assert "caroline" in common_words(["Caroline: hi"] * MIN_SAMPLE)


def test_without_drops_common_words_and_their_possessive():
    common = frozenset({"caroline"})
    assert without("What is Caroline's identity?", common) == "What is identity?"
    assert without("When did caroline paint?", common) == "When did paint?"
    # A query of nothing but common words stays as it was.
    assert without("Caroline?", common) == "Caroline?"


def test_keyword_query_leaves_out_common_words_unless_nothing_remains():
    assert match_expression("Caroline research", drop={"caroline"}) == '"research"'
    assert match_expression("Caroline", drop={"caroline"}) == '"caroline"'


async def test_vocabulary_is_cached_per_scope_until_its_ttl():
    now = [0.0]
    vocabulary = ScopeVocabulary(clock=lambda: now[0])
    reads: list[int] = []
    texts = ["Ann: x"] * MIN_SAMPLE

    async def sample(n: int) -> list[str]:
        reads.append(n)
        return texts

    assert await vocabulary.common((1, 2), sample) == frozenset({"ann", "x"})
    await vocabulary.common((1, 2), sample)
    assert len(reads) == 1
    await vocabulary.common((3,), sample)  # another scope reads its own sample
    assert len(reads) == 2
    now[0] += TTL_SECONDS + 1
    texts = ["Bob: y"] * MIN_SAMPLE
    assert await vocabulary.common((1, 2), sample) == frozenset({"bob", "y"})
    assert len(reads) == 3


async def test_concurrent_misses_for_one_scope_read_its_sample_once():
    import asyncio

    vocabulary = ScopeVocabulary()
    reads: list[int] = []
    release = asyncio.Event()

    async def sample(n: int) -> list[str]:
        reads.append(n)
        await release.wait()
        return ["Ann: x"] * MIN_SAMPLE

    both = asyncio.gather(vocabulary.common((1,), sample), vocabulary.common((1,), sample))
    # One turn of the loop (not a timed wait): both tasks start and ask before the
    # read can finish; without coalescing each would start a read of its own.
    await asyncio.sleep(0)
    release.set()
    first, second = await both
    assert first == second == frozenset({"ann", "x"})
    assert len(reads) == 1
