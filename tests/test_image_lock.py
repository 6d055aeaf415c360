"""The image's pinned dependency lists (deploy/requirements.lock and
deploy/build-requirements.lock, written by ``make lock``) still satisfy
pyproject.toml: a dependency changed without ``make lock`` fails here, before
an image build's ``pip check`` would."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
# What the image runs on: deploy/lock.py resolves for it.
IMAGE_MARKERS = {"python_version": "3.11", "sys_platform": "linux", "platform_system": "Linux"}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec = line.split()[0]
        name, _, version = spec.partition("==")
        assert version, f"{path.name}: {line!r} is not pinned with =="
        pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_every_requirement_of_the_image_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + [
        req
        for extra in ("server", "otel", "console")
        for req in project["optional-dependencies"][extra]
    ]
    pins = _pins(ROOT / "deploy" / "requirements.lock")
    for text in wanted:
        req = Requirement(text)
        if req.marker and not req.marker.evaluate(IMAGE_MARKERS):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in deploy/requirements.lock: run make lock"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"deploy/requirements.lock pins {req.name}=={pins[name]}, outside {req.specifier}:"
            " run make lock"
        )
    assert "nexus-grpc" not in pins  # the source is installed after, from the build context


def test_the_build_stage_installer_is_pinned_with_hashes():
    lines = [
        line
        for line in (ROOT / "deploy" / "build-requirements.lock").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert {canonicalize_name(line.split("==")[0]) for line in lines} == {
        "pip",
        "setuptools",
        "wheel",
    }
    assert all("--hash=sha256:" in line for line in lines)
