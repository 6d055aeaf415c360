"""``nexus-grpc hooks run HOST``: one hook event, read from stdin, answered on stdout.

Never in the agent's way: whatever goes wrong (a server down, slow or
refusing, a payload it cannot read), the hook answers nothing, writes one line
to stderr and exits 0, within ``--deadline`` (a timer ends the process if a
call outlives it). The host then goes on as if no hook were installed.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import threading
import time
from pathlib import Path

__all__ = ["main", "project_name"]

PREFIX = "nexus-grpc hooks"


def project_name(cwd: str) -> str:
    """The name of the git work tree ``cwd`` is in (its root folder's name), else
    of ``cwd`` itself: ``--project``'s default."""
    start = Path(cwd or os.getcwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder.name or str(folder)
    return start.name or str(start)


def _say(line: str) -> None:
    flat = " ".join(line.split())
    sys.stderr.write(f"{PREFIX}: {flat}\n")
    sys.stderr.flush()


def _watchdog(seconds: float, host: str) -> threading.Timer:
    """Ends the process, quietly for the host, if the hook outlives its deadline
    (a DNS lookup or a connect that ignores the call's timeout)."""

    def expire() -> None:
        _say(f"{host}: no answer within the {seconds:g} s deadline; no context")
        os._exit(0)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as fh:
        return fh.read()


def _os_user() -> str:
    """``--user``'s default; none (no USER memories) where the OS names nobody."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _api_key(args: argparse.Namespace) -> str:
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as fh:
            return fh.read().strip()
    return args.api_key or os.environ.get("NEXUS_API_KEY", "")


def main(args: argparse.Namespace, *, started: float | None = None) -> int:
    started = time.monotonic() if started is None else started
    host_name = args.host
    watchdog = _watchdog(max(args.deadline - (time.monotonic() - started), 0.0) + 0.1, host_name)
    try:
        return _run(args, started)
    except BaseException as exc:  # noqa: BLE001 - the host must never see a failure
        if isinstance(exc, KeyboardInterrupt):
            raise
        _say(f"{host_name}: {_describe(exc)}; no context")
        return 0
    finally:
        watchdog.cancel()


def _describe(exc: BaseException) -> str:
    import grpc

    if isinstance(exc, grpc.RpcError):
        code = exc.code()
        name = code.name if code is not None else "UNKNOWN"
        return f"the server answered {name}: {exc.details() or ''}".rstrip(": ")
    return str(exc) or type(exc).__name__


def _run(args: argparse.Namespace, started: float) -> int:
    # Imported here: argument errors and --help stay cheap, and this module's
    # own import is what the start-up figures measure.
    from nexus_grpc.agent_hooks import capture, recall
    from nexus_grpc.agent_hooks.deadline import Deadline
    from nexus_grpc.agent_hooks.hosts import Event, host_named
    from nexus_grpc.agent_hooks.payloads import parse
    from nexus_grpc.agent_hooks.project_cache import ProjectCache, default_path
    from nexus_grpc.agent_hooks.wire import Credentials, Wire
    from nexus_grpc.agent_hooks.workspace import Workspace

    deadline = Deadline(args.deadline, started=started)
    host = host_named(args.host)
    event = parse(host, sys.stdin.buffer.read())
    project = args.project or project_name(event.cwd)
    api_key = _api_key(args)
    credentials = Credentials(
        api_key=api_key,
        root_certificates=_read(args.cacert),
        private_key=_read(args.key),
        certificate_chain=_read(args.cert),
    )
    wire = Wire(args.target, credentials)
    try:
        ws = Workspace(
            wire,
            deadline,
            host=host.name,
            project=project,
            user=args.user or _os_user(),
            cache=ProjectCache(default_path(), target=args.target, api_key=api_key),
        )
        budgets = recall.Budgets(session_start=args.session_tokens, prompt=args.prompt_tokens)
        if event.event is Event.STOP:
            capture.record(ws, host.name, event)
            return 0
        if event.event is Event.START:
            composed = recall.at_session_start(ws, event.session_id, budgets)
        else:
            composed = recall.at_prompt(ws, event.session_id, event.prompt, budgets)
    finally:
        wire.close()
    if composed.text:
        answer = {
            "hookSpecificOutput": {
                "hookEventName": event.event_name,
                "additionalContext": composed.text,
            }
        }
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0
