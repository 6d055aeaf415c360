"""deploy/compose.yaml, the LAN deployment in one file: valid by the Compose
specification's schema, and wired the way the server reads its settings.

Neither Qdrant's nor Ollama's image can be pulled here (no registry), so the
whole file cannot run in the suite; ``make image-test`` starts its nexus
service alone from the built image (deploy/image-test.sh).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from nexus_grpc.ops.against_server.doctor import HEALTH_CLIENT_CERT_ENV, HEALTH_CLIENT_KEY_ENV
from nexus_grpc.runtime.config import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "deploy" / "compose.yaml"
CHECK_JSONSCHEMA = shutil.which("check-jsonschema") or str(
    Path(sys.executable).parent / "check-jsonschema"
)
_DEFAULT = re.compile(r"\$\{(\w+):-([^}]*)\}")


def _rendered() -> dict:
    """The file as Compose reads it with nothing set: each ``${VAR:-default}``
    becomes its default (the file uses no other form)."""
    text = "".join(
        line for line in COMPOSE.read_text().splitlines(keepends=True)
        if not line.lstrip().startswith("#")
    )  # fmt: skip
    assert "${" not in _DEFAULT.sub("", text).replace("$$", ""), "a ${...} without a default"
    return yaml.safe_load(_DEFAULT.sub(lambda m: m.group(2), text))


def _schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHECK_JSONSCHEMA, "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
    )


def test_the_file_is_valid_by_the_compose_specification(tmp_path):
    if not Path(CHECK_JSONSCHEMA).exists():
        pytest.fail("check-jsonschema is not installed: make venv installs it")
    result = _schema_check(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr
    # The check can fail: a misspelt key is refused.
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("stop_grace_period:", "stop_grace_perod:"))
    assert _schema_check(broken).returncode != 0


def test_the_server_is_given_only_settings_it_reads():
    known = {env for option in OPTIONS.values() for env in option.env}
    known |= {HEALTH_CLIENT_CERT_ENV, HEALTH_CLIENT_KEY_ENV}
    environment = _rendered()["services"]["nexus"]["environment"]
    unknown = sorted(set(environment) - known)
    assert not unknown, f"nexus-grpc reads no such setting: {unknown}"


def test_the_server_reaches_qdrant_and_ollama_by_their_service_names():
    services = _rendered()["services"]
    env = services["nexus"]["environment"]
    qdrant, ollama = urlsplit(env["QDRANT_URL"]), urlsplit(env["OLLAMA_URL"])
    assert qdrant.hostname in services and "qdrant/qdrant" in services[qdrant.hostname]["image"]
    assert qdrant.port == 6333  # Qdrant's REST port, which qdrant-client speaks
    assert ollama.hostname in services and "ollama/ollama" in services[ollama.hostname]["image"]
    assert ollama.port == 11434
    assert services["nexus"]["depends_on"]["qdrant"] == {"condition": "service_healthy"}
    # The models pulled are the ones the server is told to use.
    models = services["ollama-models"]["environment"]["MODELS"].split()
    assert env["NEXUS_EXTRACTION_MODEL"] in models and env["NEXUS_SUMMARY_MODEL"] in models
    assert env["NEXUS_LISTEN"].endswith(":50051")
    assert services["nexus"]["ports"] == ["50051:50051"]


def test_the_console_reads_the_server_by_its_service_name_with_its_own_key():
    services = _rendered()["services"]
    console = services["console"]
    assert console["image"] == services["nexus"]["image"]  # the same image runs it
    command = console["command"]
    assert command[0] == "console"
    target = command[command.index("--target") + 1]
    host, _, port = target.rpartition(":")
    served = services["nexus"]["environment"]["NEXUS_LISTEN"]
    assert host == "nexus" and port == served.rsplit(":", 1)[1]
    listen = command[command.index("--listen") + 1]
    assert listen.endswith(":" + console["ports"][0].rsplit(":", 1)[1])
    assert set(console["environment"]) == {"NEXUS_API_KEY"}
    assert console["depends_on"]["nexus"] == {"condition": "service_healthy"}


def test_every_service_keeps_its_data_restarts_and_is_health_checked():
    compose = _rendered()
    services = compose["services"]
    for name in ("nexus", "qdrant", "ollama"):
        assert services[name]["restart"] == "unless-stopped", name
        for volume in services[name]["volumes"]:
            assert volume.split(":")[0] in compose["volumes"], f"{name}: {volume}"
    # nexus-grpc keeps the image's own HEALTHCHECK (doctor --health), which
    # follows NEXUS_LISTEN and TLS; the others have none of their own.
    assert "healthcheck" not in services["nexus"]
    assert any(v.endswith(":/data") for v in services["nexus"]["volumes"])
    for name in ("qdrant", "ollama"):
        assert services[name]["healthcheck"]["test"][0] == "CMD", name
    # Qdrant and Ollama answer the compose network only; the console the
    # host's loopback.
    assert [name for name, s in services.items() if "ports" in s] == ["nexus", "console"]
    assert services["console"]["ports"] == ["127.0.0.1:8090:8090"]
    assert services["console"]["restart"] == "unless-stopped"
    assert services["console"]["healthcheck"]["test"][0] == "CMD"
    # The one-shot model pull retries a failure and then stays down.
    assert services["ollama-models"]["restart"] == "on-failure"
