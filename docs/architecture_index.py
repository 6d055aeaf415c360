"""The parts of docs/architecture.md that are read off the code, for cog.

``make docs`` rewrites them (``cog -r -I docs docs/architecture.md``) and
``make docs-check`` (run by ``make lint``) fails when the committed document
differs from what the code gives now: a module added, moved or redescribed
shows in the diff of the change that made it. Each module's line is the first
sentence of its own docstring, so the place to fix a line is the module.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "nexus_grpc"
TESTS = REPO / "tests"
#: Generated, or not Python we write: no line of their own in the index.
SKIPPED = {"gen", "static", "assets", "__pycache__"}


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line (the package's
    own docstring for an ``__init__.py``); empty when it has none."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    # A sentence ends at a full stop followed by a capital; "e.g." and
    # "qdrant-edge.py" do not end one.
    match = re.search(r"(?<=[a-z)`'\"])\.(?=\s+[A-Z(`])", first)
    sentence = first[: match.start() + 1] if match else first
    return sentence.replace("|", "\\|")


def packages() -> Iterator[Path]:
    """The package and every subpackage in it, in path order."""
    yield PACKAGE
    for path in sorted(PACKAGE.rglob("__init__.py")):
        folder = path.parent
        if folder != PACKAGE and not SKIPPED & set(folder.relative_to(PACKAGE).parts):
            yield folder


def module_index() -> str:
    """A table per package: each module and what its docstring says it is."""
    out = []
    for folder in packages():
        name = folder.relative_to(PACKAGE).as_posix()
        title = "`nexus_grpc/` (top level)" if name == "." else f"`{name}/`"
        out += [f"#### {title}", "", "| module | what it is |", "|---|---|"]
        for path in sorted(folder.glob("*.py")):
            out.append(f"| `{path.name}` | {summary(path) or '—'} |")
        out.append("")
    return "\n".join(out).rstrip("\n")


def tier_folders() -> str:
    """The folders of each test tier, as they are on disk."""
    out = []
    for tier in ("unit", "integration", "e2e"):
        root = TESTS / tier
        inner = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())
        where = ", ".join(f"`tests/{tier}/{name}`" for name in inner) or f"`tests/{tier}`"
        out.append(f"- {tier}: {where}")
    return "\n".join(out)


def seam_table() -> str:
    """Each repository of ``core/repositories.py``: the unit of work's member
    that hands it out, its methods, and what its docstring says it holds."""
    tree = ast.parse((PACKAGE / "core" / "repositories.py").read_text(encoding="utf-8"))
    protocols = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)
    }
    out = ["| `uow.` | Protocol | methods | what it holds |", "|---|---|---|---|"]
    total = 0
    for member in protocols["UnitOfWork"].body:
        if not (isinstance(member, ast.FunctionDef) and isinstance(member.returns, ast.Name)):
            continue
        repository = protocols.get(member.returns.id)
        if repository is None:
            continue
        methods = sum(isinstance(f, ast.FunctionDef) for f in repository.body)
        total += methods
        held = " ".join((ast.get_docstring(repository) or "").split())
        out.append(f"| `{member.name}` | `{repository.name}` | {methods} | {held} |")
    own = sum(isinstance(f, ast.FunctionDef) for f in protocols["UnitOfWork"].body)
    out.append(f"| | `UnitOfWork` | {own} | the members above and `savepoint` |")
    out += ["", f"{len(protocols)} Protocols, {total + own} methods ({total} on repositories)."]
    return "\n".join(out)
