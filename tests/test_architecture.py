"""docs/architecture.md's diagram names every part of the package.

A package or top-level module added without a place in the drawing fails
here, so the drawing and the code cannot drift apart silently again.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nexus_grpc

PACKAGE = Path(nexus_grpc.__file__).parent
DOC = Path(__file__).parent.parent / "docs" / "architecture.md"


def diagram() -> str:
    """The first fenced block of the document: the floor plan."""
    match = re.search(r"```\n(.*?)```", DOC.read_text(), re.S)
    assert match, "docs/architecture.md has no diagram"
    return match.group(1)


def parts() -> set[str]:
    """Each subpackage (``name/``) and top-level module (``name.py``)."""
    found = set()
    for path in PACKAGE.iterdir():
        if path.name.startswith(("_", ".")):
            continue
        if path.is_dir() and (path / "__init__.py").is_file():
            found.add(f"{path.name}/")
        elif path.suffix == ".py":
            found.add(path.name)
    return found


def test_the_diagram_names_every_package_and_top_level_module():
    drawn = diagram()
    missing = sorted(p for p in parts() if not re.search(rf"(?<![\w/]){re.escape(p)}", drawn))
    assert not missing, f"docs/architecture.md's diagram does not name: {missing}"


def test_the_diagram_names_nothing_that_is_gone():
    """A part the diagram draws (``name/`` at the start of a row) exists."""
    drawn = diagram()
    named = set(re.findall(r"^\s*([a-z_]+/)\s", drawn, re.M))
    assert named, "no package rows found in the diagram"
    assert named <= parts(), f"the diagram draws what is gone: {sorted(named - parts())}"


def test_the_check_sees_a_new_package(tmp_path, monkeypatch):
    """The check is not vacuous: a package the drawing lacks is reported."""
    fake = tmp_path / "nexus_grpc"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "api").mkdir()
    (fake / "api" / "__init__.py").write_text("")
    (fake / "newthing").mkdir()
    (fake / "newthing" / "__init__.py").write_text("")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", fake)
    assert parts() == {"api/", "newthing/"}
    assert "newthing/" not in diagram()


def test_the_unit_tier_runs_on_fakes_not_on_a_database():
    """tests/unit runs the domain's rules on tests/fakes.py: a module there that
    reaches for SQLite or the store belongs in tests/integration/store (docs/testing.md)."""
    unit = Path(__file__).parent / "unit"
    reaching = sorted(
        path.name
        for path in unit.glob("*.py")
        if re.search(r"^\s*(import sqlite3|from nexus_grpc\.store|import nexus_grpc\.store)",
                     path.read_text(), re.M)
    )  # fmt: skip
    assert reaching == [], f"unit tests that use a database: {reaching}"


REPO = PACKAGE.parent
# A path the prose names: in backticks, with a folder, ending in a file of the
# repository's kinds or a folder's slash.
_NAMED_PATH = re.compile(
    r"`((?:[\w.-]+/)+(?:[\w.-]+\.(?:py|md|proto|sh|json|toml|ts|js|sql|yml))?)`"
)


def named_paths(text: str) -> set[str]:
    return set(_NAMED_PATH.findall(text))


def missing_paths(text: str) -> list[str]:
    """Named paths that are neither in the repository nor in the package (a
    path under a placeholder such as ``DATA_DIR/`` is the server's, at run time)."""
    return sorted(
        p
        for p in named_paths(text)
        if not p.split("/")[0].isupper() and not (REPO / p).exists() and not (PACKAGE / p).exists()
    )


def test_every_path_the_document_names_exists():
    """A module that moves takes its name in docs/architecture.md with it."""
    assert named_paths(DOC.read_text()), "the document names no paths"
    assert missing_paths(DOC.read_text()) == []


def test_the_path_check_sees_a_path_that_is_gone():
    text = "`store/episodes.py` and `store/no_such_module.py` and `docs/testing.md`"
    assert missing_paths(text) == ["store/no_such_module.py"]


# A file the prose names without its folder (`views.py`), in backticks.
_BARE_NAME = re.compile(r"`([\w.-]+\.(?:py|md|proto|sh|json|toml|ts|js|sql|yml))`")
_FOLDER = re.compile(r"`((?:[\w.-]+/)+)`")
# Single backticks: the module index quotes docstrings, whose ``names`` are
# theirs to keep true (test_docstrings_name_modules_that_exist).
_TOKEN = re.compile(r"(?<!`)`([^`\s]+)`(?!`)")
#: Files the document names that are not ours (googleapis' error details).
ELSEWHERE = {"error_details.proto"}


def _exists(path: str) -> bool:
    return (REPO / path).exists() or (PACKAGE / path).exists()


def missing_bare_names(text: str) -> list[str]:
    """Bare file names that are not where their context puts them.

    A bare name belongs to the folders named (as `folder/`) before it in its
    paragraph, else in its section: "`console/` ... `reads.py`, `views.py`"
    means console/views.py. A name listed right after a top-level folder
    ("`core/`, `errors.py`") is a top-level module; a name with no folder
    before it is the package's or the repository's own."""
    missing = []
    for section in re.split(r"\n(?=#+ )", text):
        in_section: list[str] = []
        for paragraph in re.split(r"\n\s*\n|\n(?=\s*- )", section):
            in_paragraph: list[str] = []
            previous = ""
            for token in _TOKEN.findall(paragraph):
                if _FOLDER.fullmatch(f"`{token}`"):
                    in_paragraph.append(token)
                elif _BARE_NAME.fullmatch(f"`{token}`") and token not in ELSEWHERE:
                    folders = in_paragraph or in_section
                    listed_at_top = previous.endswith("/") and previous.count("/") == 1
                    found = any(_exists(f + token) for f in folders) if folders else _exists(token)
                    if not found and not (listed_at_top and (PACKAGE / token).exists()):
                        missing.append(f"{token} (beside {', '.join(folders) or 'the top'})")
                previous = token
            in_section += in_paragraph
    return missing


def test_every_file_the_prose_names_without_its_folder_exists():
    """`views.py` in the console's paragraph is console/views.py: it must exist."""
    assert missing_bare_names(DOC.read_text()) == []


def test_the_bare_name_check_reads_the_folder_from_the_paragraph():
    text = (
        "`console/` is a client: `reads.py` reads, `views.py` shows, `app.py` routes.\n\n"
        "`core/`, `errors.py` and `gen/`: `nowhere.py`, then `cli.py`."
    )
    assert missing_bare_names(text) == [
        "views.py (beside console/)",
        "app.py (beside console/)",
        "nowhere.py (beside core/, gen/)",
        "cli.py (beside core/, gen/)",
    ]
    assert missing_bare_names("# A\n\n`cli.py` and `gone.py`") == ["gone.py (beside the top)"]


def test_the_diagram_names_only_files_that_exist():
    """The floor plan's file names (``base.py``, ``locomo.py``) are files of the package."""
    files = {p.name for p in PACKAGE.rglob("*.py")} | {
        p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
    }
    drawn = set(re.findall(r"(?<![\w.])((?:\w+/)*\w+\.py)\b", diagram()))
    assert drawn, "the diagram names no files"
    assert sorted(drawn - files) == []


def test_the_generated_parts_of_the_document_are_current():
    """docs/architecture.md's module index and test folders are cog's output
    (docs/architecture_index.py): `make docs` rewrites them, and a module
    added, moved or redescribed without it fails here as in `make docs-check`."""
    check = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "--diff", "-I", "docs", "docs/architecture.md"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, f"docs/architecture.md is stale: run `make docs`\n{check.stdout}"
