"""Sampling settings shared by the prompt modules and ``LLMClient``.

A ``TypedDict`` (not a plain dict) so ``LLMClient.chat_json(..., **EXTRACTION_OPTIONS)``
type-checks: the keys are exactly the keyword arguments of the client methods.
"""

from __future__ import annotations

from typing import TypedDict


class SamplingOptions(TypedDict):
    temperature: float
    num_predict: int
