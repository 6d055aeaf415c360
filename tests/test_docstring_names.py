"""Docstrings and comments name modules that exist.

A module that moves or goes takes every mention of it along: a path
(``store/episodes.py``, ``tests/unit/test_fusion.py``), a dotted name
(``nexus_grpc.client.connection``, ``core.storage.Database``) or a bare file
name (``prewarm.py``) in the package's docstrings and comments is checked
against the tree, so "see db.py" cannot outlive db.py.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import nexus_grpc

PACKAGE = Path(nexus_grpc.__file__).parent
REPO = PACKAGE.parent
#: Paths that are someone else's (the protos of grpc and googleapis) or the
#: workspace's beside the repository (shared/).
ELSEWHERE = ("google/", "grpc/", "grpc_reflection/", "shared/")
#: Dotted names that only look like ours: a logger's name, OpenTelemetry's
#: span attributes, LangGraph's store methods, a numpy array's attributes.
NOT_MODULES = {
    "nexus_grpc.access",
    "rpc.system",
    "rpc.service",
    "rpc.method",
    "rpc.grpc.status_code",
    "store.get",
    "store.put",
    "store.search",
    "vectors.shape",
    "vectors.ndim",
}
#: A dotted name ending in one of these is a file name (``errors.py``).
FILE_ENDINGS = {"py", "md", "css", "js", "html", "json", "proto", "txt", "toml", "yml", "sh"}
TOP = sorted(
    p.name if p.is_dir() else p.stem
    for p in PACKAGE.iterdir()
    if not p.name.startswith(("_", ".")) and (p.suffix == ".py" or (p / "__init__.py").is_file())
)

_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.(?:py|md|proto|sh|toml|json|yml|mjs))\b")
_BARE = re.compile(r"(?<![\w./-])([a-z_]\w*\.py)\b")
_DOTTED = re.compile(rf"(?<![\w./-])((?:nexus_grpc|{'|'.join(TOP)})(?:\.\w+)+)")
ALL_FILES = {p.name for p in REPO.rglob("*.py") if not {".venv", "node_modules"} & set(p.parts)}


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """Each comment and string literal of a module, with its line."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            yield token.start[0], token.string


def path_exists(named: str, here: Path) -> bool:
    if named.startswith(ELSEWHERE):
        return True
    return any((base / named).exists() for base in (PACKAGE, REPO, here, here.parent))


def dotted_exists(named: str) -> bool:
    """The longest module prefix exists, and what follows it is a name defined in it."""
    parts = named.removeprefix("nexus_grpc.").split(".")
    for n in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:n])
        module = base.with_suffix(".py")
        if not module.is_file():
            module = base / "__init__.py"
        if not module.is_file():
            continue
        if n == len(parts):
            return True
        name = re.escape(parts[n])
        defined = (
            rf"^\s*(?:async\s+def|def|class)\s+{name}\b"
            rf"|^\s*{name}\s*[:=]|^\s*{name},|import\b.*\b{name}\b"
        )
        return bool(re.search(defined, module.read_text(encoding="utf-8"), re.M))
    return False


def stale_names(path: Path) -> list[str]:
    here = path.parent
    found = []
    for line, text in prose(path):
        for named in _PATH.findall(text):
            if not named.split("/")[0].isupper() and not path_exists(named, here):
                found.append(f"{line}: {named}")
        for named in _DOTTED.findall(text):
            ending = named.rsplit(".", 1)[1]
            if named not in NOT_MODULES and ending not in FILE_ENDINGS and not dotted_exists(named):
                found.append(f"{line}: {named}")
        for named in _BARE.findall(text):
            if named not in ALL_FILES:
                found.append(f"{line}: {named}")
    return found


def sources() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if "gen" not in path.relative_to(PACKAGE).parts:
            yield path


def test_docstrings_name_modules_that_exist():
    stale = {
        str(path.relative_to(REPO)): names for path in sources() if (names := stale_names(path))
    }
    assert stale == {}


def test_the_check_sees_a_module_that_is_gone(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text(
        '"""Runs on the writer (see db.py and store/no_such.py); the records are\n'
        "``core.models.NoSuchRecord`` and ``nexus_grpc.no_such_module``, the seam\n"
        '``core.storage.Database`` (store/sqlite/database.py)."""\n'
        "# nexus_grpc.client.connection opens the channel\n"
    )
    assert stale_names(module) == [
        "1: store/no_such.py",
        "1: core.models.NoSuchRecord",
        "1: nexus_grpc.no_such_module",
        "1: db.py",
    ]
