"""``nexus-grpc hooks install|uninstall HOST``: our entries into the host's settings,
and exactly them out again.

- Where: ``--scope project`` (the default) writes the project's file (the git
  work tree's root, else the current folder): ``.claude/settings.json``,
  ``.codex/hooks.json`` or ``.gemini/settings.json``; ``--scope user`` the
  user's, where the host reads it (``~/.claude/settings.json`` or
  ``$CLAUDE_CONFIG_DIR``, ``$CODEX_HOME/hooks.json``, ``~/.gemini/settings.json``
  or ``$GEMINI_CLI_HOME``).
- What: one command per event, ``nexus-grpc hooks run HOST`` with the
  connection flags given here (never the key itself: settings files get
  committed, so a key given with ``--api-key`` goes into a file of its own
  under ``~/.config/nexus-grpc/``, readable by the user alone, and the command
  names that file; without one the hook reads ``NEXUS_API_KEY`` from the
  environment the host passes it).
- Codex: its trust for the three hooks too (``codex_trust.py``).

Installing again replaces our entries; the file is edited in place
(``json_text.py``), so everything else in it stays byte for byte.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nexus_grpc.agent_hooks import codex_trust, receipts, settings_file
from nexus_grpc.agent_hooks.hosts import Host, codex_home, host_named
from nexus_grpc.agent_hooks.json_text import NotJSON
from nexus_grpc.agent_hooks.options import DEFAULTS

__all__ = ["InstallError", "Plan", "command_line", "install", "settings_path", "uninstall"]

#: The host's own timeout, past the hook's deadline: a backstop only (the hook
#: ends itself at its deadline).
HOST_TIMEOUT_MARGIN = 3.0


class InstallError(Exception):
    """Refused: nothing was written."""


@dataclass(frozen=True)
class Plan:
    """What ``hooks install`` was asked for."""

    host: str
    scope: str = "project"
    target: str = DEFAULTS["target"]
    api_key: str = ""
    api_key_file: str = ""
    cacert: str = ""
    cert: str = ""
    key: str = ""
    project: str = ""
    user: str = ""
    deadline: float = DEFAULTS["deadline"]
    session_tokens: int = DEFAULTS["session_tokens"]
    prompt_tokens: int = DEFAULTS["prompt_tokens"]


def project_root(cwd: Path) -> Path:
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def settings_path(host: Host, scope: str, cwd: Path, environ: Mapping[str, str]) -> Path:
    if scope == "user":
        return host.user_file(dict(environ))
    return project_root(cwd) / host.project_file


def _executable() -> str:
    """How the hook runs this program: ``nexus-grpc`` when that name on PATH is
    this one (a committed project file then works for everyone who has it on
    PATH), else its absolute path."""
    me = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    on_path = shutil.which("nexus-grpc")
    if me is not None and me.name == "nexus-grpc":
        if on_path and Path(on_path).resolve() == me:
            return "nexus-grpc"
        return str(me)
    if on_path:
        return "nexus-grpc"
    # Run as a module (python -m nexus_grpc.cli): the same interpreter, by path.
    return f"{shlex.quote(sys.executable)} -m nexus_grpc.cli"


def _key_file(plan: Plan, environ: Mapping[str, str]) -> str:
    """The key file the command names: the one given, or the given key written
    to one of ours."""
    if plan.api_key_file:
        return str(Path(plan.api_key_file).expanduser().resolve())
    if not plan.api_key:
        return ""
    base = environ.get("XDG_CONFIG_HOME") or str(
        Path(environ.get("HOME") or Path.home()) / ".config"
    )
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in plan.target)
    path = Path(base) / "nexus-grpc" / "agent-hooks" / f"{safe}.key"
    return str(path)


def command_line(plan: Plan, key_file: str, executable: str | None = None) -> str:
    parts = [executable or _executable(), "hooks", "run", plan.host]
    flags: list[tuple[str, str]] = [("--target", plan.target)]
    if key_file:
        flags.append(("--api-key-file", key_file))
    for flag, path in (("--cacert", plan.cacert), ("--cert", plan.cert), ("--key", plan.key)):
        if path:
            flags.append((flag, str(Path(path).expanduser().resolve())))
    if plan.project:
        flags.append(("--project", plan.project))
    if plan.user:
        flags.append(("--user", plan.user))
    if plan.deadline != DEFAULTS["deadline"]:
        flags.append(("--deadline", f"{plan.deadline:g}"))
    if plan.session_tokens != DEFAULTS["session_tokens"]:
        flags.append(("--session-tokens", str(plan.session_tokens)))
    if plan.prompt_tokens != DEFAULTS["prompt_tokens"]:
        flags.append(("--prompt-tokens", str(plan.prompt_tokens)))
    words = [parts[0]] + [shlex.quote(p) for p in parts[1:]]
    for flag, value in flags:
        words += [flag, shlex.quote(value)]
    return " ".join(words)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _write(path: Path, text: str) -> None:
    """Replaces ``path`` at once, keeping its mode (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.nexus-grpc-tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    except FileNotFoundError:
        pass
    os.replace(tmp, path)


def _write_key(path: str, key: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(key + "\n")
    os.chmod(target, 0o600)


def install(
    plan: Plan,
    *,
    cwd: Path,
    environ: Mapping[str, str],
    out: IO[str],
    executable: str | None = None,
) -> Path:
    host = host_named(plan.host)
    path = settings_path(host, plan.scope, cwd, environ)
    root = project_root(cwd)
    key_file = _key_file(plan, environ)
    if plan.api_key_file and not Path(key_file).is_file():
        raise InstallError(f"--api-key-file {plan.api_key_file}: no such file")
    if key_file and _inside(Path(key_file), root) and plan.scope == "project":
        raise InstallError(
            f"the key file {key_file} is inside the project ({root}), where it may be committed;"
            " keep it outside (or give no key: the hook reads NEXUS_API_KEY from the"
            " environment)"
        )
    command = command_line(plan, key_file, executable)
    timeout = math.ceil((plan.deadline + HOST_TIMEOUT_MARGIN) * host.timeout_per_second)
    before = _read(path)
    ours = settings_file.is_ours(host.name)
    events = list(host.events.values())
    previous = receipts.load(path, environ)
    try:
        text = settings_file.remove(before, ours, previous) if before.strip() else before
        if previous and "file" in previous and text.strip() == "{}":
            text = ""  # what is left of a file our last install created
        created = settings_file.created_by_adding(text, events)
        text = settings_file.add(text, {e: settings_file.group(command, timeout) for e in events})
    except NotJSON as exc:
        raise InstallError(
            f"{path} cannot be edited ({exc}); nothing was written. Add the hooks by hand:"
            f" for each of {', '.join(events)}, a command hook running: {command}"
        ) from None
    trust_path, trust_text = None, None
    if host.name == "codex":
        trust_path, trust_text = _codex_trust(path, text, events, command, timeout, environ, out)
    if plan.api_key and not plan.api_key_file:
        _write_key(key_file, plan.api_key)
        out.write(f"wrote the API key to {key_file} (readable by you alone)\n")
    _write(path, text)
    receipts.save(path, created, environ)
    if trust_path is not None and trust_text is not None:
        _write(trust_path, trust_text)
        out.write(f"trusted the three hooks in {trust_path}\n")
    out.write(f"installed {host.title} hooks ({', '.join(events)}) in {path}\n")
    out.write(f"they run: {command}\n")
    if not key_file:
        out.write(
            "no API key given: the hook sends NEXUS_API_KEY from the environment the host"
            " runs it in, if any\n"
        )
    _notes(host, plan.scope, out)
    return path


def _codex_trust(
    hooks_path: Path,
    text: str,
    events: list[str],
    command: str,
    timeout: int,
    environ: Mapping[str, str],
    out: IO[str],
) -> tuple[Path, str]:
    ours = settings_file.is_ours("codex")
    config = codex_home(dict(environ)) / "config.toml"
    before = _read(config)
    groups = settings_file.positions(text, events, ours)
    trust = codex_trust.entries(hooks_path, groups, command, timeout)
    try:
        after, skipped = codex_trust.add_block(before, trust, created=not config.exists())
    except ValueError as exc:  # tomllib.TOMLDecodeError
        raise InstallError(
            f"{config} cannot take the hooks' trust ({exc}); nothing was written"
        ) from None
    for key in skipped:
        out.write(
            f"note: {config} already holds a trust entry for {key}; if Codex shows the hook"
            " as changed, trust it in Codex's /hooks\n"
        )
    return config, after


def _notes(host: Host, scope: str, out: IO[str]) -> None:
    if host.name == "codex" and scope == "project":
        out.write(
            "Codex reads a project's .codex/ only in a trusted project (codex --trust, or its"
            " trust prompt)\n"
        )
    if host.name == "gemini" and scope == "project":
        out.write("Gemini CLI reads a project's .gemini/settings.json only in a trusted folder\n")


def uninstall(
    host_name: str, scope: str, *, cwd: Path, environ: Mapping[str, str], out: IO[str]
) -> Path:
    host = host_named(host_name)
    path = settings_path(host, scope, cwd, environ)
    before = _read(path)
    created = receipts.load(path, environ)
    if before.strip():
        try:
            after = settings_file.remove(before, settings_file.is_ours(host.name), created)
        except NotJSON as exc:
            raise InstallError(f"{path} cannot be edited ({exc}); nothing was changed") from None
        if after != before:
            if after.strip() == "{}" and (created is None or "file" in created):
                # All that is left is what an install into no file wrote.
                path.unlink()
                _remove_if_empty(path.parent)
            else:
                _write(path, after)
            out.write(f"removed the {host.title} hooks from {path}\n")
        else:
            out.write(f"{path} holds no nexus-grpc hooks\n")
    else:
        out.write(f"{path} holds no nexus-grpc hooks\n")
    receipts.drop(path, environ)
    if host.name == "codex":
        config = codex_home(dict(environ)) / "config.toml"
        text = _read(config)
        after, created_file = codex_trust.remove_block(text)
        if after != text:
            if created_file and not after:
                config.unlink()
            else:
                _write(config, after)
            out.write(f"removed their trust from {config}\n")
    return path


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
