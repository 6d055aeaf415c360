"""How much of the seam the fakes keep, and what the contract test runs of it.

    .venv/bin/python -m tests.fakes_reach

Counts, per repository of ``core/repositories.py``'s ``UnitOfWork``, the
methods ``tests/fakes.py``'s ``FakeUnitOfWork`` keeps and which of those the
contract files (every ``tests/integration/store/test_repository_contract*.py``)
call, by the same ``declared``/``called`` helpers as ``tests/test_seam_calls.py``;
then names the methods not faked. docs/testing.md quotes its figures.
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes import FakeUnitOfWork
from tests.test_seam_calls import called, declared

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    seam = declared((ROOT / "nexus_grpc/core/repositories.py").read_text())
    contract_files = sorted((ROOT / "tests/integration/store").glob("test_repository_contract*.py"))
    contract = called([f.read_text() for f in contract_files], set(seam))
    uow = FakeUnitOfWork()
    kept = run = total = 0
    for member, methods in seam.items():
        fake = getattr(uow, member, None)
        faked = [m for m in methods if callable(getattr(fake, m, None))]
        tested = [m for m in faked if (member, m) in contract]
        missing = sorted(set(methods) - set(faked))
        kept, run, total = kept + len(faked), run + len(tested), total + len(methods)
        line = f"{member}: {len(faked)} of {len(methods)} faked, {len(tested)} run by the contract"
        print(line + (f"; not faked: {', '.join(missing)}" if missing else ""))
    print(f"all: {kept} of {total} faked, {run} run by the contract test")


if __name__ == "__main__":
    main()
