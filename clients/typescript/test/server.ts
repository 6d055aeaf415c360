/**
 * Starts the real `nexus-grpc serve` from the repository's virtualenv, as an
 * operator would (tests/process.py does the same for the Python tests).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";

const REPO = path.resolve(__dirname, "..", "..", "..", "..");
const BIN = process.env.NEXUS_GRPC_BIN ?? path.join(REPO, ".venv", "bin", "nexus-grpc");
const PORT_LINE = /serving on \S+ \(port (\d+)\)/;

export class Server {
  readonly dataDir: string;
  port = 0;
  log = "";
  private proc: ChildProcessWithoutNullStreams | undefined;
  private stopped = false;

  constructor(private readonly extra: string[] = []) {
    this.dataDir = mkdtempSync(path.join(tmpdir(), "nexus-ts-"));
  }

  get target(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Starts the server (on `port`, or an ephemeral one) and resolves once it listens. */
  start(port = 0, timeoutMs = 60_000): Promise<void> {
    // A restart racing a failed test's teardown must not leave a server behind.
    if (this.stopped) return Promise.reject(new Error("server already stopped"));
    const proc = spawn(
      BIN,
      ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", this.dataDir, ...this.extra],
      { stdio: "pipe" },
    );
    this.proc = proc;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        proc.kill("SIGKILL");
        reject(new Error(`server did not start:\n${this.log}`));
      }, timeoutMs);
      proc.stdout.resume();
      proc.stderr.setEncoding("utf8");
      proc.stderr.on("data", (chunk: string) => {
        this.log += chunk;
        const found = PORT_LINE.exec(this.log);
        if (found && !this.port) {
          this.port = Number(found[1]);
        }
        if (found && this.port === Number(found[1])) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.on("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`server exited with ${code}:\n${this.log}`));
      });
    });
  }

  /** kill -9: no graceful shutdown, as a crash would be. Resolves once it is gone. */
  kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      proc.once("exit", () => resolve());
      proc.kill("SIGKILL");
    });
  }

  /** Restarts on the same port and data directory. */
  async restart(): Promise<void> {
    await this.kill();
    this.log = "";
    await this.start(this.port);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.kill();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** A port no one listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Two real instances, each on its own database of the embedded PostgreSQL
 * (`python -m tests.instances` from the repository's virtualenv), one of which
 * the test can take down: its database refuses connections, and its gRPC
 * health says NOT_SERVING until it is back.
 */
export class Instances {
  a = "";
  b = "";
  private proc: ChildProcessWithoutNullStreams | undefined;
  private lines: string[] = [];
  private waiting: Array<(line: string) => void> = [];
  private log = "";

  async start(timeoutMs = 120_000): Promise<void> {
    const python = path.join(path.dirname(BIN), "python");
    const proc = spawn(python, ["-m", "tests.instances"], { cwd: REPO, stdio: "pipe" });
    this.proc = proc;
    proc.stderr.setEncoding("utf8");
    proc.stderr.on("data", (chunk: string) => {
      this.log = (this.log + chunk).slice(-20_000);
    });
    proc.stdout.setEncoding("utf8");
    let buffered = "";
    proc.stdout.on("data", (chunk: string) => {
      buffered += chunk;
      let end: number;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 1);
        const waiter = this.waiting.shift();
        if (waiter) waiter(line);
        else this.lines.push(line);
      }
    });
    const ready = JSON.parse(await this.next(timeoutMs)) as { a: string; b: string };
    this.a = ready.a;
    this.b = ready.b;
  }

  /** Sends a command of tests/instances.py and resolves with its JSON answer. */
  async send(command: "down" | "up" | "count", timeoutMs = 60_000): Promise<Record<string, unknown>> {
    this.proc?.stdin.write(`${command}\n`);
    return JSON.parse(await this.next(timeoutMs)) as Record<string, unknown>;
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once("exit", () => resolve());
      proc.stdin.end("quit\n");
    });
  }

  private next(timeoutMs: number): Promise<string> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer from the instances:\n${this.log}`)), timeoutMs);
      this.waiting.push((answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
    });
  }
}
