"""The store's seam (``core/repositories.py``) read as code: ``declared``
lists each ``UnitOfWork`` member's repository methods from its Protocols,
and ``called`` finds the calls through a repository in some sources
(``uow.graph.neighbors``, or ``store.start`` after ``store = uow.erasures``).
Not a test module: the check that every seam method is called from outside
the store (tests/test_seam_calls.py), the contract tests' check that each
faked method has a case (tests/integration/store/test_repository_contract.py)
and the fakes' reach (tests/fakes_reach.py) all read the seam this way."""

from __future__ import annotations

import ast
from pathlib import Path

import nexus_grpc

PACKAGE = Path(nexus_grpc.__file__).parent
SEAM = PACKAGE / "core" / "repositories.py"


def declared(source: str) -> dict[str, list[str]]:
    """``{UnitOfWork member: its repository's methods}``, from the Protocols."""
    classes = {
        node.name: node
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)
    }
    members: dict[str, list[str]] = {}
    for prop in classes["UnitOfWork"].body:
        if isinstance(prop, ast.FunctionDef) and isinstance(prop.returns, ast.Name):
            repository = classes.get(prop.returns.id)
            if repository is not None:
                members[prop.name] = [
                    f.name for f in repository.body if isinstance(f, ast.FunctionDef)
                ]
    return members


def called(sources: list[str], members: set[str]) -> set[tuple[str, str]]:
    """``(member, method)`` for each call through a repository in ``sources``."""
    found = set()
    for source in sources:
        tree = ast.parse(source)
        aliases = {
            target.id: node.value.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in members
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            holder = node.value
            if isinstance(holder, ast.Attribute) and holder.attr in members:
                found.add((holder.attr, node.attr))
            elif isinstance(holder, ast.Name) and holder.id in aliases:
                found.add((aliases[holder.id], node.attr))
    return found
