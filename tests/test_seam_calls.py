"""Every method the store's seam declares is called from outside the store.

``core/repositories.py`` is the port the domain owns: a method on it costs a
Protocol line, a store function and a binding, so one that nothing calls is
dead weight three times over (docs/architecture.md, "The seam"). A call is
``<x>.<repository>.<method>`` where ``<repository>`` is a ``UnitOfWork``
member (``uow.graph.neighbors``), or ``<name>.<method>`` where ``<name>`` was
assigned from one (``store = uow.erasures``), in any module of ``nexus_grpc``
outside ``store/``.
"""

from __future__ import annotations

from tests.seam_walk import PACKAGE, SEAM, called, declared


def uncalled(seam: str, sources: list[str]) -> list[str]:
    members = declared(seam)
    calls = called(sources, set(members))
    return sorted(
        f"{member}.{method}"
        for member, methods in members.items()
        for method in methods
        if (member, method) not in calls
    )


def outside_the_store() -> list[str]:
    return [
        path.read_text()
        for path in PACKAGE.rglob("*.py")
        if "store" not in path.relative_to(PACKAGE).parts[:1] and path != SEAM
    ]


def test_every_seam_method_is_called_outside_the_store():
    dead = uncalled(SEAM.read_text(), outside_the_store())
    assert not dead, f"core/repositories.py declares methods nothing calls: {dead}"


def test_the_check_sees_a_method_nothing_calls():
    """Not vacuous: a declared method without a call is reported, by either path."""
    seam = (
        "class GraphRepository(Protocol):\n"
        "    def neighbors(self) -> None: ...\n"
        "    def walk(self) -> None: ...\n"
        "class ErasureRepository(Protocol):\n"
        "    def start(self) -> None: ...\n"
        "    def stop(self) -> None: ...\n"
        "class UnitOfWork(Protocol):\n"
        "    @property\n"
        "    def graph(self) -> GraphRepository: ...\n"
        "    @property\n"
        "    def erasures(self) -> ErasureRepository: ...\n"
    )
    domain = "def f(uow):\n    uow.graph.neighbors()\n    store = uow.erasures\n    store.start()\n"
    assert uncalled(seam, [domain]) == ["erasures.stop", "graph.walk"]
