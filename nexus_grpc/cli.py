"""The ``nexus-grpc`` command: serve, bench, eval, reindex, migrate-store, doctor,
export, import, usage, mcp, console and hooks."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

T = TypeVar("T")

# The server's modules are imported by the commands that use them: `hooks run`
# starts on every prompt of a coding agent and imports none of them.


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    from nexus_grpc.runtime.config import OPTIONS, env_default, help_text

    for name, option in OPTIONS.items():
        parser.add_argument(
            option.flag, dest=name, default=env_default(name), help=help_text(option)
        )


def _settings(args: argparse.Namespace):
    from nexus_grpc.runtime.config import OPTIONS, settings_from

    return settings_from({name: getattr(args, name) for name in OPTIONS})


SERVER_EXTRA_HINT = (
    "nexus-grpc: the server's dependencies are not installed ({missing});"
    " `pip install 'nexus-grpc[server]'` installs them (plain `nexus-grpc` is the client)"
)


def cmd_serve(args: argparse.Namespace) -> int:
    from nexus_grpc.core import redact
    from nexus_grpc.observability.heap import release_large_blocks

    try:
        from nexus_grpc.app import EmbedderMismatch, StartupError
        from nexus_grpc.observability import logs
        from nexus_grpc.rpc.auth import KeyFileError
        from nexus_grpc.runtime.tls import TLSConfigError
        from nexus_grpc.server import serve
    except ModuleNotFoundError as exc:
        # A client-only install (`pip install nexus-grpc`) has the CLI but not the server.
        print(SERVER_EXTRA_HINT.format(missing=exc.name), file=sys.stderr)
        return 2

    settings = _settings(args)
    # Before the first log line: none may show a credential of the settings.
    redact.remember(settings.credentials())
    logs.configure(settings.log_level, settings.log_format)
    release_large_blocks()
    try:
        asyncio.run(serve(settings))
    except (
        StartupError,
        EmbedderMismatch,
        KeyFileError,
        TLSConfigError,
        OSError,
        ValueError,
    ) as exc:
        # Configuration problems: a clear line, not a traceback, after the log lines
        # that led to it.
        logs.stop()
        print(f"nexus-grpc: {redact.scrub(str(exc))}", file=sys.stderr)
        return 2
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from nexus_grpc.observability.heap import release_large_blocks

    try:
        from nexus_grpc.observability import logs
        from nexus_grpc.ops.beside_server.reindex import reindex
    except ModuleNotFoundError as exc:
        print(SERVER_EXTRA_HINT.format(missing=exc.name), file=sys.stderr)
        return 2

    settings = _settings(args)
    logs.configure("WARNING", settings.log_format)
    release_large_blocks()
    asyncio.run(reindex(settings, progress=sys.stderr))
    return 0


def cmd_migrate_store(args: argparse.Namespace) -> int:
    try:
        from nexus_grpc.observability import logs
        from nexus_grpc.ops.beside_server.migrate_store import MigrateError, migrate_store
    except ModuleNotFoundError as exc:
        print(SERVER_EXTRA_HINT.format(missing=exc.name), file=sys.stderr)
        return 2

    settings = _settings(args)
    logs.configure("WARNING", settings.log_format)
    try:
        asyncio.run(migrate_store(settings, progress=sys.stderr))
    except MigrateError as exc:
        print(f"nexus-grpc: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.health:
        return _health_check(args)
    from nexus_grpc.ops.against_server.doctor import doctor

    def read(path: str | None) -> bytes | None:
        if not path:
            return None
        with open(path, "rb") as fh:
            return fh.read()

    if bool(args.cert) != bool(args.key):
        raise SystemExit("doctor: --cert and --key go together (a client certificate for mTLS)")
    try:
        roots, key, chain = read(args.cacert), read(args.key), read(args.cert)
    except OSError as exc:
        raise SystemExit(f"doctor: {exc}") from exc
    if (key or chain) and roots is None:
        raise SystemExit("doctor: --cert/--key need --cacert (mTLS runs over TLS)")
    return asyncio.run(
        doctor(
            args.target,
            timeout=args.timeout,
            api_key=args.api_key or None,
            root_certificates=roots,
            private_key=key,
            certificate_chain=chain,
        )
    )


def _health_check(args: argparse.Namespace) -> int:
    """``doctor --health``: the server that ``serve`` starts from this environment."""
    from nexus_grpc.ops.against_server.doctor import (
        EXIT_UNHEALTHY,
        HealthConfigError,
        health_check,
        probe_from_environment,
    )

    try:
        probe = probe_from_environment()
    except HealthConfigError as exc:
        print(f"unhealthy: {exc}")
        return EXIT_UNHEALTHY
    return asyncio.run(health_check(probe, timeout=args.timeout))


def cmd_bench(args: argparse.Namespace) -> int:
    from nexus_grpc.ops.against_server.bench import main as bench_main

    return bench_main(args)


def cmd_eval_memories(args: argparse.Namespace) -> int:
    from nexus_grpc.evaluation.memory_eval import main as memories_main

    return memories_main(args)


def cmd_eval_recall(args: argparse.Namespace) -> int:
    from nexus_grpc.evaluation.recall import main as recall_main

    return recall_main(args)


def cmd_eval_graph(args: argparse.Namespace) -> int:
    from nexus_grpc.evaluation.graph_eval import main as graph_main

    return graph_main(args)


def _add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="127.0.0.1:50051", help="server HOST:PORT")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("NEXUS_API_KEY", ""),
        help="sent as authorization: Bearer KEY (default: $NEXUS_API_KEY)",
    )
    parser.add_argument("--cacert", default=None, help="PEM root certificates: use TLS")
    parser.add_argument("--cert", default=None, help="PEM client certificate, for mTLS")
    parser.add_argument("--key", default=None, help="PEM client private key, for mTLS")


def _client(args: argparse.Namespace):
    from nexus_grpc.client import NexusClient

    def read(path: str | None) -> bytes | None:
        if not path:
            return None
        with open(path, "rb") as fh:
            return fh.read()

    if bool(args.cert) != bool(args.key):
        raise SystemExit(f"{args.command}: --cert and --key go together (mTLS)")
    try:
        roots, key, chain = read(args.cacert), read(args.key), read(args.cert)
    except OSError as exc:
        raise SystemExit(f"{args.command}: {exc}") from exc
    return NexusClient(
        args.target,
        api_key=args.api_key or None,
        root_certificates=roots,
        private_key=key,
        certificate_chain=chain,
    )


def cmd_export(args: argparse.Namespace) -> int:
    from nexus_grpc.client.base import NexusClientError
    from nexus_grpc.ops.against_server.transfer import export_project

    async def run(out: IO[str]) -> dict[str, int]:
        async with _client(args) as client:
            return await export_project(client, args.project_id, out)

    try:
        if args.output == "-":
            counts = asyncio.run(run(sys.stdout))
        else:
            with open(args.output, "w", encoding="utf-8") as out:
                counts = asyncio.run(run(out))
    except (NexusClientError, OSError) as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 1
    print(f"exported {_counted(counts)}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from nexus_grpc.client.base import NexusClientError
    from nexus_grpc.ops.against_server.transfer import ImportResult, import_project

    target: list[int] = []

    def told(project_id: int, resumed: bool, renamed_to: str) -> None:
        target.append(project_id)
        if resumed:
            print(
                f"import: project {project_id} already holds this file's first records:"
                " importing what it does not hold yet",
                file=sys.stderr,
            )
        else:
            print(f"import: importing into new project {project_id}", file=sys.stderr)
        if renamed_to:
            print(
                f"import: this tenant already has a project of the file's name, and a name is"
                f" unique in a tenant: the new project is called {renamed_to!r}",
                file=sys.stderr,
            )

    async def run(lines: IO[str]) -> ImportResult:
        async with _client(args) as client:
            return await import_project(client, lines, into=args.into, on_project=told)

    if args.into < 0:
        print(f"import: --into must be a project id, got {args.into}", file=sys.stderr)
        return 2
    if args.restore:
        if args.into:
            print("import: --restore writes a new project; it takes no --into", file=sys.stderr)
            return 2
        return _restore(args)
    try:
        result = _on_input(args.input, run)
    except (NexusClientError, OSError, ValueError) as exc:
        print(f"import: {exc}", file=sys.stderr)
        if target:
            print(
                f"import: project {target[0]} holds what was imported so far; the same command"
                f" with --into {target[0]} finishes it (nothing is imported twice)",
                file=sys.stderr,
            )
        return 1
    if not result.created:
        print(
            f"import: nothing to import: project {result.project_id} already holds everything"
            f" in this file ({_counted(result.existing)})",
            file=sys.stderr,
        )
    else:
        found = f"; already there: {_counted(result.existing)}" if result.existing else ""
        print(
            f"imported into project {result.project_id}: {_counted(result.created)}{found}",
            file=sys.stderr,
        )
    print(result.project_id)
    return 0


def _restore(args: argparse.Namespace) -> int:
    from nexus_grpc.client.base import NexusClientError
    from nexus_grpc.ops.against_server.transfer import RestoreResult, restore_project

    async def run(lines: IO[str]) -> RestoreResult:
        async with _client(args) as client:
            return await restore_project(client, lines)

    try:
        result = _on_input(args.input, run)
    except (NexusClientError, OSError, ValueError) as exc:
        print(f"import: {exc}", file=sys.stderr)
        print("import: nothing was restored", file=sys.stderr)
        return 1
    print(
        f"restored into new project {result.project_id}: {_counted(result.created)}",
        file=sys.stderr,
    )
    print(result.project_id)
    return 0


def cmd_usage(args: argparse.Namespace) -> int:
    from nexus_grpc.client.base import NexusClientError
    from nexus_grpc.ops.against_server.usage import UsageError, usage_table

    async def run() -> str:
        async with _client(args) as client:
            return await usage_table(
                client,
                project=args.project,
                tenant=args.tenant,
                since=args.since,
                bucket=args.bucket,
            )

    try:
        print(asyncio.run(run()))
    except UsageError as exc:
        print(f"usage: {exc}", file=sys.stderr)
        return 2
    except NexusClientError as exc:
        print(f"usage: {exc}", file=sys.stderr)
        return 1
    return 0


MCP_EXTRA_HINT = (
    "nexus-grpc mcp: the MCP SDK is not installed ({missing});"
    " `pip install 'nexus-grpc[mcp]'` installs it"
)


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from nexus_grpc.mcp.serve import run
    except ModuleNotFoundError as exc:
        print(MCP_EXTRA_HINT.format(missing=exc.name), file=sys.stderr)
        return 2
    return run(args, _client(args))


CONSOLE_EXTRA_HINT = (
    "nexus-grpc console: the web console's dependencies are not installed ({missing});"
    " `pip install 'nexus-grpc[console]'` installs them"
)


def cmd_console(args: argparse.Namespace) -> int:
    try:
        from nexus_grpc.console.serve import run
    except ModuleNotFoundError as exc:
        print(CONSOLE_EXTRA_HINT.format(missing=exc.name), file=sys.stderr)
        return 2
    return run(args, _client(args))


def cmd_hooks_install(args: argparse.Namespace) -> int:
    from nexus_grpc.agent_hooks.install import InstallError, Plan, install

    plan = Plan(
        host=args.host,
        scope=args.scope,
        target=args.target,
        api_key=args.api_key,
        api_key_file=args.api_key_file,
        cacert=args.cacert,
        cert=args.cert,
        key=args.key,
        project=args.project,
        user=args.user,
        deadline=args.deadline,
        session_tokens=args.session_tokens,
        prompt_tokens=args.prompt_tokens,
    )
    try:
        install(plan, cwd=Path.cwd(), environ=os.environ, out=sys.stdout)
    except (InstallError, OSError) as exc:
        print(f"hooks install: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_hooks_uninstall(args: argparse.Namespace) -> int:
    from nexus_grpc.agent_hooks.install import InstallError, uninstall

    try:
        uninstall(args.host, args.scope, cwd=Path.cwd(), environ=os.environ, out=sys.stdout)
    except (InstallError, OSError) as exc:
        print(f"hooks uninstall: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_hooks_run(args: argparse.Namespace) -> int:
    from nexus_grpc.agent_hooks.run import main as run_hook

    return run_hook(args)


def _on_input(path: str, run: Callable[[IO[str]], Coroutine[object, object, T]]) -> T:
    """``run`` over the lines of ``path`` ("-": standard input)."""
    if path == "-":
        return asyncio.run(run(sys.stdin))
    with open(path, encoding="utf-8") as lines:
        return asyncio.run(run(lines))


def cmd_forget_user(args: argparse.Namespace) -> int:
    from nexus_grpc.client.base import NexusClientError
    from nexus_grpc.ops.against_server.forgetting import forget_user

    bar = sys.stderr.isatty()

    def progress(line: str) -> None:
        # On a terminal the bar redraws one line; in a log, a line a step.
        print(f"\r{line}" if bar else line, end="" if bar else "\n", file=sys.stderr, flush=True)

    async def run() -> None:
        async with _client(args) as client:
            await forget_user(
                client,
                args.user,
                args.project,
                wait=not args.no_wait,
                as_json=args.json,
                progress=None if args.quiet else progress,
            )

    try:
        asyncio.run(run())
    except NexusClientError as exc:
        print(f"forget-user: {exc}", file=sys.stderr)
        return 1
    finally:
        if bar and not args.quiet:
            print(file=sys.stderr)
    return 0


def cmd_export_user(args: argparse.Namespace) -> int:
    from nexus_grpc.client.base import NexusClientError
    from nexus_grpc.ops.against_server.forgetting import export_user

    async def run(out: IO[str]) -> dict[str, int]:
        async with _client(args) as client:
            return dict(await export_user(client, args.user, args.project, out))

    try:
        if args.output == "-":
            counts = asyncio.run(run(sys.stdout))
        else:
            with open(args.output, "w", encoding="utf-8") as out:
                counts = asyncio.run(run(out))
    except (NexusClientError, OSError) as exc:
        print(f"export-user: {exc}", file=sys.stderr)
        return 1
    print(f"exported {_counted(counts)}", file=sys.stderr)
    return 0


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "nothing"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nexus-grpc", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_server_commands(sub)
    _add_transfer_commands(sub)
    _add_client_commands(sub)
    _add_privacy_commands(sub)
    _add_eval_commands(sub)
    _add_hooks_commands(sub)
    return parser


if TYPE_CHECKING:
    #: What ``add_subparsers`` returns: where each command adds its parser.
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def _add_server_commands(sub: Commands) -> None:
    """The commands that run the server or open its store, and ``doctor``."""
    serve = sub.add_parser("serve", help="run the gRPC server")
    _add_server_options(serve)
    serve.set_defaults(func=cmd_serve)

    reindex = sub.add_parser(
        "reindex", help="rebuild the vector index from SQLite (stop the server first)"
    )
    _add_server_options(reindex)
    reindex.set_defaults(func=cmd_reindex)

    migrate = sub.add_parser(
        "migrate-store",
        help="copy the embedded dataset of --data-dir into the PostgreSQL of --database-url"
        " (safe to re-run; verifies counts)",
    )
    _add_server_options(migrate)
    migrate.set_defaults(func=cmd_migrate_store)

    doctor = sub.add_parser("doctor", help="print a running server's health detail")
    doctor.add_argument("--target", default="127.0.0.1:50051", help="server HOST:PORT")
    doctor.add_argument("--timeout", type=float, default=5.0, help="seconds to wait")
    doctor.add_argument(
        "--api-key",
        default=os.environ.get("NEXUS_API_KEY", ""),
        help="sent as authorization: Bearer KEY (default: $NEXUS_API_KEY)",
    )
    doctor.add_argument("--cacert", default=None, help="PEM root certificates: use TLS")
    doctor.add_argument("--cert", default=None, help="PEM client certificate, for mTLS")
    doctor.add_argument("--key", default=None, help="PEM client private key, for mTLS")
    doctor.add_argument(
        "--health",
        action="store_true",
        help="the container's health check: one grpc.health.v1 Check of the server that"
        " `serve` starts from this environment (NEXUS_LISTEN, NEXUS_TLS_CERT, NEXUS_TLS_KEY,"
        " NEXUS_TLS_CLIENT_CA; under mTLS NEXUS_HEALTH_CLIENT_CERT and NEXUS_HEALTH_CLIENT_KEY,"
        " else the server's own certificate); exit 0 only when SERVING, else 1; --target"
        " and the certificate flags are not used",
    )
    doctor.set_defaults(func=cmd_doctor)


def _add_transfer_commands(sub: Commands) -> None:
    """``export`` and ``import``: a project as JSON Lines, out of a server and into one."""
    export = sub.add_parser(
        "export", help="write a project (sessions, episodes, memories, graph...) as JSON Lines"
    )
    export.add_argument("project_id", type=int, help="the project to export")
    export.add_argument("-o", "--output", default="-", help="file to write ('-': stdout)")
    _add_client_options(export)
    export.set_defaults(func=cmd_export)

    importer = sub.add_parser(
        "import",
        help="read an export (JSON Lines) into a server as a new project; run again, it"
        " finishes an interrupted import and duplicates nothing",
    )
    importer.add_argument("input", help="the export file ('-': stdin)")
    importer.add_argument(
        "--into",
        type=int,
        default=0,
        metavar="PROJECT_ID",
        help="import into this existing project, writing only what it does not hold yet"
        " (default: a new project, or the one an earlier import of this file wrote to)",
    )
    importer.add_argument(
        "--restore",
        action="store_true",
        help="write the file as it was exported, server-assigned fields included (times,"
        " history authors, use and mention counts), into a new project, all or nothing,"
        " through RestoreProject (needs an admin key when auth is on)",
    )
    _add_client_options(importer)
    importer.set_defaults(func=cmd_import)


def _add_client_commands(sub: Commands) -> None:
    """The commands in front of a running server: usage, mcp, console, bench."""
    from nexus_grpc.ops.against_server.usage import add_arguments as add_usage_arguments

    usage = sub.add_parser(
        "usage",
        help="what the LLM cost, per stage (calls, tokens, seconds, outcomes), for the key's"
        " tenant or one project, and the tenant's spend today against its budget",
    )
    add_usage_arguments(usage)
    _add_client_options(usage)
    usage.set_defaults(func=cmd_usage)

    from nexus_grpc.mcp.options import add_arguments as add_mcp_arguments

    mcp = sub.add_parser(
        "mcp",
        help="serve the memory tools to coding agents over MCP (stdio, or streamable"
        " HTTP with --http), in front of a running server",
    )
    add_mcp_arguments(mcp)
    _add_client_options(mcp)
    mcp.set_defaults(func=cmd_mcp)

    from nexus_grpc.console.options import add_arguments as add_console_arguments

    console = sub.add_parser(
        "console",
        help="serve a web console in front of a running server: projects, timelines,"
        " memories with their history, the graph through time, a search playground",
    )
    add_console_arguments(console)
    _add_client_options(console)
    console.set_defaults(func=cmd_console)

    from nexus_grpc.ops.against_server.bench import add_arguments

    bench = sub.add_parser("bench", help="load-test a running server, ghz style")
    add_arguments(bench)
    bench.set_defaults(func=cmd_bench)


def _add_eval_commands(sub: Commands) -> None:
    """``eval recall``, ``eval memories`` and ``eval graph``: measure a running server."""
    evaluation = sub.add_parser("eval", help="measure a running server")
    evals = evaluation.add_subparsers(dest="eval_command", required=True)
    from nexus_grpc.evaluation.recall import add_arguments as add_recall_arguments

    recall = evals.add_parser(
        "recall",
        help="store long conversations (LoCoMo format) and report how often search finds"
        " the evidence",
    )
    add_recall_arguments(recall)
    recall.set_defaults(func=cmd_eval_recall)
    from nexus_grpc.evaluation.memory_eval import add_arguments as add_memory_arguments

    memories = evals.add_parser(
        "memories",
        help="store scripted conversations and report how memories form from them"
        " (docs/memory-eval.md)",
    )
    add_memory_arguments(memories)
    memories.set_defaults(func=cmd_eval_memories)

    from nexus_grpc.evaluation.graph_eval import add_arguments as add_graph_arguments

    graph = evals.add_parser(
        "graph",
        help="store a scripted set of episodes and report how well the graph resolves"
        " entities and keeps facts current (docs/graph-eval.md)",
    )
    add_graph_arguments(graph)
    graph.set_defaults(func=cmd_eval_graph)


def _add_privacy_commands(sub: Commands) -> None:
    """``forget-user`` and ``export-user``: a person's erasure and data-access
    requests (docs/privacy.md)."""
    forget = sub.add_parser(
        "forget-user",
        help="erase a user everywhere (ForgetUser), following it with a progress bar, then"
        " print the receipt: what went, by kind, with no content",
    )
    forget.add_argument("--user", required=True, help="the user_id to forget")
    forget.add_argument(
        "--project", type=int, default=0, help="only in this project (default: the whole tenant)"
    )
    forget.add_argument("--json", action="store_true", help="print the receipt as JSON")
    forget.add_argument(
        "--no-wait",
        action="store_true",
        help="return once the erasure has started (it goes on on the server; GetErasure reads it)",
    )
    forget.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_client_options(forget)
    forget.set_defaults(func=cmd_forget_user)

    export = sub.add_parser(
        "export-user",
        help="write everything held about a user (ExportUser) as JSON Lines, the export format",
    )
    export.add_argument("--user", required=True, help="the user_id to export")
    export.add_argument(
        "--project", type=int, default=0, help="only in this project (default: the whole tenant)"
    )
    export.add_argument("-o", "--output", default="-", help="file to write ('-': stdout)")
    _add_client_options(export)
    export.set_defaults(func=cmd_export_user)


def _add_hooks_commands(sub: Commands) -> None:
    """``hooks``: install, uninstall and run the coding agents' hooks."""
    from nexus_grpc.agent_hooks import options as hook_options

    hooks = sub.add_parser(
        "hooks",
        help="memory for coding agents without a tool call: hooks for Claude Code, Codex CLI"
        " and Gemini CLI that record each exchange and bring back what matters"
        " (docs/agents.md)",
    )
    hook_commands = hooks.add_subparsers(dest="hooks_command", required=True)
    hooks_install = hook_commands.add_parser(
        "install", help="merge the hooks into the host's settings, keeping everything else"
    )
    hook_options.add_install(hooks_install)
    hooks_install.set_defaults(func=cmd_hooks_install)
    hooks_uninstall = hook_commands.add_parser(
        "uninstall", help="take exactly our hooks out of the host's settings"
    )
    hook_options.add_uninstall(hooks_uninstall)
    hooks_uninstall.set_defaults(func=cmd_hooks_uninstall)
    hooks_run = hook_commands.add_parser(
        "run", help="what the host runs: one event's JSON on stdin, the context on stdout"
    )
    hook_options.add_run(hooks_run)
    hooks_run.set_defaults(func=cmd_hooks_run)


class _ReaderGone(BaseException):
    """stdout's reader closed the pipe (``nexus-grpc doctor | head`` read what
    it wanted). Not an ``Exception``: no command's own ``except OSError`` takes
    it for a failure of the command; ``main`` ends the command quietly."""


class _Stdout:
    """``sys.stdout``, with a write into a closed pipe raised as _ReaderGone
    (a BrokenPipeError of any other pipe stays what it is)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise _ReaderGone from None

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _ReaderGone from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stdout = sys.stdout
    sys.stdout = _Stdout(stdout)  # type: ignore[assignment]
    try:
        try:
            if argv[:2] == ["hooks", "run"]:
                # Once per prompt: its own small parser, not every command's.
                from nexus_grpc.agent_hooks.options import run_parser

                return cmd_hooks_run(run_parser().parse_args(argv[2:]))
            args = build_parser().parse_args(argv)
            return int(args.func(args) or 0)
        finally:
            # Output still buffered meets a closed pipe here, not at exit.
            sys.stdout.flush()
    except _ReaderGone:
        # A reader that stops early is no failure. What is left to print goes
        # nowhere, so the interpreter's own flush at exit is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        return 0
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    raise SystemExit(main())
