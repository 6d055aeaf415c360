"""Edits to a JSON settings file that leave every other byte as it was.

The hosts' settings are the user's files: an install must not reformat them,
and an uninstall must give back what was there. So the file is not loaded
and dumped; it is scanned into nodes that know where each member and element
starts and ends, and an edit splices text in or out at those places. Gemini
CLI reads its settings as JSON with comments (``//``, ``/* */``) and trailing
commas, so the scanner accepts those too.

An item is appended after the last one with the container's own separator and
indentation, and removed with the separator before it, so that removing what
was appended gives the file back byte for byte.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Member", "Node", "NotJSON", "append", "parse", "remove", "render"]

_SCALAR = json.JSONDecoder()
_NUMBER_OR_WORD = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


class NotJSON(ValueError):
    """The file is not JSON (with comments) that the scanner can edit."""


@dataclass
class Member:
    key: str
    #: Where the member starts (its key's opening quote).
    start: int
    value: Node


@dataclass
class Node:
    kind: str  # "object", "array" or "scalar"
    start: int
    end: int
    value: Any = None
    members: list[Member] = field(default_factory=list)
    elements: list[Node] = field(default_factory=list)

    def member(self, key: str) -> Member | None:
        for m in self.members:
            if m.key == key:
                return m
        return None

    def items(self) -> list[tuple[int, int]]:
        """(start, end) of each member or element, in order."""
        if self.kind == "object":
            return [(m.start, m.value.end) for m in self.members]
        return [(e.start, e.end) for e in self.elements]

    def data(self) -> Any:
        """The node as plain Python data."""
        if self.kind == "object":
            return {m.key: m.value.data() for m in self.members}
        if self.kind == "array":
            return [e.data() for e in self.elements]
        return self.value


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text

    def skip(self, i: int) -> int:
        """Past whitespace and comments."""
        text = self.text
        while i < len(text):
            if text[i] in " \t\r\n\ufeff":
                i += 1
            elif text.startswith("//", i):
                newline = text.find("\n", i)
                i = len(text) if newline < 0 else newline + 1
            elif text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0:
                    raise NotJSON(f"a comment opened at character {i} is never closed")
                i = close + 2
            else:
                break
        return i

    def value(self, i: int) -> Node:
        i = self.skip(i)
        if i >= len(self.text):
            raise NotJSON("the file ends where a value should be")
        c = self.text[i]
        if c == "{":
            return self._container(i, "object", "}")
        if c == "[":
            return self._container(i, "array", "]")
        if c == '"':
            value, end = _SCALAR.raw_decode(self.text, i)
            return Node("scalar", i, end, value)
        found = _NUMBER_OR_WORD.match(self.text, i)
        if not found:
            raise NotJSON(f"unexpected {self.text[i]!r} at character {i}")
        return Node("scalar", i, found.end(), json.loads(found.group()))

    def _container(self, start: int, kind: str, close: str) -> Node:
        node = Node(kind, start, start)
        i = self.skip(start + 1)
        while True:
            if i >= len(self.text):
                raise NotJSON(f"the {kind} at character {start} is never closed")
            if self.text[i] == close:
                node.end = i + 1
                return node
            if kind == "object":
                if self.text[i] != '"':
                    raise NotJSON(f"a key should start at character {i}")
                key, after = _SCALAR.raw_decode(self.text, i)
                colon = self.skip(after)
                if self.text[colon : colon + 1] != ":":
                    raise NotJSON(f"':' expected at character {colon}")
                value = self.value(colon + 1)
                node.members.append(Member(key, i, value))
            else:
                value = self.value(i)
                node.elements.append(value)
            i = self.skip(value.end)
            if self.text[i : i + 1] == ",":
                i = self.skip(i + 1)
            elif self.text[i : i + 1] != close:
                raise NotJSON(f"',' or {close!r} expected at character {i}")


def parse(text: str) -> Node:
    scanner = _Scanner(text)
    try:
        node = scanner.value(0)
    except (ValueError, IndexError) as exc:
        raise NotJSON(str(exc)) from None
    if scanner.skip(node.end) != len(text):
        raise NotJSON(f"unexpected text after the value, at character {node.end}")
    return node


def _line_indent(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    line = text[line_start:at]
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_unit(text: str) -> str:
    """The file's indentation step: the first indented line's, else two spaces."""
    found = re.search(r"\n([ \t]+)\S", text)
    return found.group(1) if found else "  "


def render(value: Any, indent: str | None, unit: str) -> str:
    """``value`` as JSON: on one line (``indent`` None), or multi-line with its
    lines after the first at ``indent``."""
    if indent is None:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    step = len(unit) if unit.strip(" ") == "" else 1
    lines = json.dumps(value, ensure_ascii=False, indent=step).split("\n")
    if unit.startswith("\t"):
        lines = [_tabs(line) for line in lines]
    return ("\n" + indent).join(lines)


def _tabs(line: str) -> str:
    stripped = line.lstrip(" ")
    return "\t" * (len(line) - len(stripped)) + stripped


def append(text: str, container: Node, value: Any, *, key: str | None = None) -> str:
    """``text`` with ``value`` (as member ``key`` of an object) after the
    container's last item, formatted as its items are."""
    unit = indent_unit(text)
    items = container.items()
    prefix = "" if key is None else json.dumps(key, ensure_ascii=False) + ": "
    if items:
        last_start, last_end = items[-1]
        between = text[container.start + 1 : items[0][0]]
        if "\n" in between:
            indent = _line_indent(text, last_start)
            item = prefix + render(value, indent, unit)
            return text[:last_end] + ",\n" + indent + item + text[last_end:]
        item = prefix + render(value, None, unit)
        return text[:last_end] + ", " + item + text[last_end:]
    outer = _line_indent(text, container.start)
    inner = outer + unit
    item = prefix + render(value, inner, unit)
    close = container.end - 1
    return text[: container.start + 1] + "\n" + inner + item + "\n" + outer + text[close:]


def remove(text: str, container: Node, index: int) -> str:
    """``text`` without the container's item ``index`` and the separator that
    joined it to the item before it (or after it, for the first)."""
    items = container.items()
    start, end = items[index]
    if index > 0:
        return text[: items[index - 1][1]] + text[end:]
    if len(items) > 1:
        return text[:start] + text[items[1][0] :]
    return text[: container.start + 1] + text[container.end - 1 :]
