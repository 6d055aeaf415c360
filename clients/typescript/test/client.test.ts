import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  DEGRADED_KEY,
  EMPTY_REASON_KEY,
  EXISTING_KEY,
  NexusClient,
  NexusError,
  NexusInvalidArgument,
  NexusNotFound,
  NexusResourceExhausted,
  NexusUnauthenticated,
  STATUS_DETAILS_KEY,
  Status,
  graph,
  memory,
  retryableMethods,
  serviceConfig,
  summary,
} from "../src";
import { freePort, Instances, Server } from "./server";

test("only calls safe to repeat are in the retry policy", () => {
  const methods = new Set(
    retryableMethods([
      memory.MemoryServiceDefinition,
      graph.GraphServiceDefinition,
      summary.SummaryServiceDefinition,
    ]).map((m) => m.method),
  );
  for (const safe of ["GetEpisode", "ListEpisodes", "SearchEpisodes", "WatchExtractions", "CreateEpisode", "CreateMemory"]) {
    assert.ok(methods.has(safe), safe);
  }
  for (const unsafe of ["CreateSession", "CreateProject", "UpdateMemory", "DeleteEpisode", "UpsertEntity", "SummarizeSession", "SummarizeProject", "ExtractEpisode", "CreateSummary"]) {
    assert.ok(!methods.has(unsafe), unsafe);
  }
  const config = serviceConfig([{ service: "s", method: "m" }], { maxAttempts: 3, initialBackoffMs: 250 }) as {
    methodConfig: Array<{ retryPolicy: Record<string, unknown> }>;
  };
  assert.equal(config.methodConfig[0].retryPolicy.maxAttempts, 3);
  assert.equal(config.methodConfig[0].retryPolicy.initialBackoff, "0.25s");
  assert.deepEqual(config.methodConfig[0].retryPolicy.retryableStatusCodes, ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]);
});

describe("against a plaintext server", () => {
  const server = new Server();
  let client: NexusClient;

  before(async () => {
    await server.start();
    client = new NexusClient(server.target, { timeoutMs: 10_000 });
  });
  after(async () => {
    client?.close();
    await server.stop();
  });

  test("creates, reads and lists through the three services", async () => {
    const project = await client.memory.createProject({ project: { name: "ts-client" } });
    assert.ok(project.id > 0);
    assert.equal(project.name, "ts-client");
    assert.ok(project.createTime instanceof Date);

    const session = await client.memory.createSession({ session: { name: "s", projectId: project.id } });
    const episode = await client.memory.createEpisode({
      sessionId: session.id,
      userMessage: "the deploy key rotates every ninety days",
      aiResponse: "noted",
      metadata: { source: "test" },
    });
    assert.equal(episode.sessionId, session.id);
    assert.deepEqual(episode.metadata, { source: "test" });

    const listed = await client.memory.listEpisodes({ sessionId: session.id });
    assert.deepEqual(listed.episodes.map((e) => e.id), [episode.id]);

    const entity = await client.graph.upsertEntity({ projectId: project.id, name: "deploy key", type: "concept" });
    assert.equal((await client.graph.getEntity({ id: entity.id })).name, "deploy key");

    const summary = await client.summary.createSummary({
      summary: { projectId: project.id, content: "rotation policy" },
    });
    assert.equal((await client.summary.getSummary({ id: summary.id })).content, "rotation policy");
  });

  test("server streams are async iterables", async () => {
    const session = await client.memory.createSession({ session: { name: "stream" } });
    // Keyword search also reads each episode's neighbouring turns: the banana
    // episode comes last, after no turn that mentions apples.
    for (const text of ["apples are red", "apples grow on trees", "bananas are yellow"]) {
      await client.memory.createEpisode({ sessionId: session.id, userMessage: text });
    }
    const hits: memory.SearchHit[] = [];
    for await (const hit of client.memory.searchEpisodes({
      query: "apples",
      sessionId: session.id,
      mode: memory.SearchMode.SEARCH_MODE_KEYWORD,
    })) {
      hits.push(hit);
    }
    assert.equal(hits.length, 2);
    assert.ok(hits.every((h) => h.episode?.userMessage.includes("apples")));
  });

  test("explain gives each hit its rank and score at every stage; without it, nothing", async () => {
    const session = await client.memory.createSession({ session: { name: "explain" } });
    await client.memory.createEpisode({ sessionId: session.id, userMessage: "the heron nests by the weir" });
    await client.memory.createEpisode({ sessionId: session.id, userMessage: "nothing of birds here" });
    const ask = { query: "heron", sessionId: session.id, mode: memory.SearchMode.SEARCH_MODE_KEYWORD };
    const explained: memory.SearchHit[] = [];
    for await (const hit of client.memory.searchEpisodes({ ...ask, explain: true })) explained.push(hit);
    assert.equal(explained.length, 1);
    const [keyword] = explained[0].explanation?.stages ?? [];
    assert.equal(keyword.stage, "keyword");
    assert.equal(keyword.rank, 1);
    assert.ok(keyword.score > 0, "bm25, higher is better");
    assert.match(keyword.note, /matched: heron/);
    const plain: memory.SearchHit[] = [];
    for await (const hit of client.memory.searchEpisodes(ask)) plain.push(hit);
    assert.deepEqual(plain.map((h) => h.episode?.id), explained.map((h) => h.episode?.id));
    assert.equal(plain[0].explanation, undefined);
  });

  test("GetUsage reads a project's window: its episodes, and no LLM stage without an LLM", async () => {
    const project = await client.memory.createProject({ project: { name: "ts-usage" } });
    const session = await client.memory.createSession({ session: { name: "u", projectId: project.id } });
    for (const text of ["one", "two"]) {
      await client.memory.createEpisode({ sessionId: session.id, userMessage: text });
    }
    const usage = await client.memory.getUsage({ projectId: project.id });
    assert.equal(usage.projectId, project.id);
    assert.equal(usage.bucket, memory.UsageBucket.USAGE_BUCKET_DAY, "the default bucket, filled in");
    assert.ok(usage.startTime instanceof Date && usage.endTime instanceof Date);
    assert.equal(usage.total?.episodes, 2);
    assert.deepEqual(usage.total?.stages, []);
    assert.equal(usage.buckets.reduce((n, b) => n + b.episodes, 0), 2);
    assert.equal(usage.budget?.exhausted, false);
    await assert.rejects(client.memory.getUsage({ projectId: project.id, tenant: "other" }), (error: unknown) => {
      assert.ok(error instanceof NexusInvalidArgument);
      assert.match(error.details, /project_id/);
      return true;
    });
  });

  test("a client stream imports episodes from any iterable and answers once", async () => {
    const session = await client.memory.createSession({ session: { name: "import" } });
    async function* turns() {
      for (let i = 0; i < 300; i++) {
        yield { episode: { sessionId: session.id, userMessage: `turn ${i}`, requestId: `ts-${i}` } };
      }
    }
    const answer = await client.memory.importEpisodes(turns());
    assert.equal(answer.received, 300);
    assert.equal(answer.created, 300);
    assert.equal(answer.episodeIds.length, 300);
    // A plain array works too; the same request_ids replay, and a bad item is reported.
    const again = await client.memory.importEpisodes([
      { episode: { sessionId: session.id, userMessage: "turn 0", requestId: "ts-0" } },
      { episode: { sessionId: session.id, userMessage: "no request id" } },
    ]);
    assert.equal(again.replayed, 1);
    assert.equal(again.failed, 1);
    assert.equal(again.episodeIds[0], answer.episodeIds[0]);
    assert.equal(again.errors[0].index, 1);
    assert.equal(again.errors[0].code, Status.INVALID_ARGUMENT);
    assert.match(again.errors[0].message, /request_id/);
  });

  test("a create without a request_id gets one, so a retry cannot duplicate it", async () => {
    const session = await client.memory.createSession({ session: { name: "dedupe" } });
    const first = await client.memory.createEpisode({ sessionId: session.id, userMessage: "a" });
    const again = await client.memory.createEpisode({ sessionId: session.id, userMessage: "b" });
    assert.notEqual(first.id, again.id, "distinct calls get distinct ids");
    const requestId = "caller-chosen-id";
    const one = await client.memory.createEpisode({ sessionId: session.id, userMessage: "c", requestId });
    const two = await client.memory.createEpisode({ sessionId: session.id, userMessage: "c", requestId });
    assert.equal(two.id, one.id, "the caller's request_id is kept and deduplicates");
    const listed = await client.memory.listEpisodes({ sessionId: session.id });
    assert.equal(listed.episodes.length, 3);
  });

  test("a failed call raises NexusError with the status code, message and request id", async () => {
    await assert.rejects(client.memory.getSession({ id: 987_654 }), (error: unknown) => {
      assert.ok(error instanceof NexusError);
      assert.equal(error.code, Status.NOT_FOUND);
      assert.equal(error.codeName, "NOT_FOUND");
      assert.match(error.details, /987654/);
      assert.ok(error.requestId, "the server's x-request-id comes back");
      return true;
    });
    await assert.rejects(client.memory.createEpisode({ sessionId: 0, userMessage: "x" }), (error: unknown) => {
      assert.ok(error instanceof NexusError);
      assert.equal(error.code, Status.INVALID_ARGUMENT);
      assert.match(error.details, /session/);
      return true;
    });
  });

  test("a refusal is the typed error for its status, with the server's google.rpc details", async () => {
    const title = client.memory.createMemory({
      memory: { kind: memory.MemoryKind.MEMORY_KIND_USER, title: "", content: "c", userId: "alice" } as memory.Memory,
    });
    await assert.rejects(title, (error: unknown) => {
      assert.ok(error instanceof NexusInvalidArgument, String(error));
      assert.ok(error instanceof NexusError, "the typed errors are NexusErrors");
      assert.equal(error.code, Status.INVALID_ARGUMENT);
      assert.equal(error.details, "memory.title is required and must not be blank");
      assert.deepEqual(error.fieldViolations, [{ field: "memory.title", description: error.details }]);
      assert.ok(error.requestId, "the request id trailer survives beside the details");
      return true;
    });
    await assert.rejects(client.memory.listMemories({ scope: { userId: " bob" } as memory.MemoryScope }), (error: unknown) => {
      assert.ok(error instanceof NexusInvalidArgument);
      assert.deepEqual(error.fieldViolations.map((v) => v.field), ["scope.user_id"]);
      return true;
    });
    await assert.rejects(client.memory.getSession({ id: 987_654 }), (error: unknown) => {
      assert.ok(error instanceof NexusNotFound, String(error));
      assert.equal(error.resourceInfo?.resourceType, "session");
      assert.equal(error.resourceInfo?.resourceName, "987654");
      assert.deepEqual(error.fieldViolations, []);
      return true;
    });
  });

  test("a deadline ends a call that outlives it", async () => {
    const started = Date.now();
    const events = client.graph.watchExtractions({}, { timeoutMs: 300 });
    await assert.rejects(
      (async () => {
        for await (const _ of events) void _;
      })(),
      (error: unknown) => error instanceof NexusError && error.code === Status.DEADLINE_EXCEEDED,
    );
    assert.ok(Date.now() - started >= 250);
  });

  test("cancelling a long-lived stream ends the loop without an error", async () => {
    const controller = new AbortController();
    const events = client.graph.watchExtractions({}, { signal: controller.signal });
    const loop = (async () => {
      let seen = 0;
      for await (const _ of events) seen += 1;
      return seen;
    })();
    // The watch has no default deadline; it ends only because it is cancelled.
    setTimeout(() => controller.abort(), 200);
    assert.equal(typeof (await loop), "number");
  });

  test("an unreachable server fails fast with UNAVAILABLE", async () => {
    const nobody = new NexusClient(`127.0.0.1:${await freePort()}`, { retry: { maxAttempts: 2 } });
    try {
      await assert.rejects(nobody.memory.getServiceStatus({}), (error: unknown) => {
        return error instanceof NexusError && error.code === Status.UNAVAILABLE;
      });
    } finally {
      nobody.close();
    }
  });
});

describe("against a server that takes one WatchExtractions stream", () => {
  const server = new Server(["--max-watch-streams", "1"]);
  let client: NexusClient;

  before(async () => {
    await server.start();
    client = new NexusClient(server.target, { timeoutMs: 10_000, retry: false });
  });
  after(async () => {
    client?.close();
    await server.stop();
  });

  test("a stream past the cap is NexusResourceExhausted naming the limit in a QuotaFailure", async () => {
    // Two streams against a limit of one: whichever the server takes second is refused.
    const controller = new AbortController();
    const firstFailure = (stream: AsyncIterable<unknown>): Promise<unknown> =>
      (async () => {
        for await (const _ of stream) {
          // events would come only from extractions; none run here
        }
      })().then(
        () => new Promise(() => undefined), // cancelled at the end: never the refusal
        (error: unknown) => error,
      );
    const refused = await Promise.race([
      firstFailure(client.graph.watchExtractions({}, { signal: controller.signal })),
      firstFailure(client.graph.watchExtractions({}, { signal: controller.signal })),
    ]);
    controller.abort();
    assert.ok(refused instanceof NexusResourceExhausted, String(refused));
    assert.match(refused.details, /--max-watch-streams/);
    assert.equal(refused.quotaViolations.length, 1);
    const [quota] = refused.quotaViolations;
    assert.equal(quota.quotaId, "max-watch-streams");
    assert.equal(quota.quotaValue, 1);
    assert.equal(quota.subject, "server");
    assert.equal(refused.errorInfo?.reason, "WATCH_STREAM_LIMIT");
    assert.equal(refused.errorInfo?.domain, "nexus-grpc");
  });
});

describe("what the server says beside an answer (the x-nexus-* trailers)", () => {
  // No LLM (so memories never form: LLM_OFF), and a reranker no one listens on
  // (so the default search mode cannot be reordered: x-nexus-degraded).
  let server: Server;
  let client: NexusClient;

  before(async () => {
    server = new Server(["--reranker-url", `http://127.0.0.1:${await freePort()}`, "--reranker-timeout", "0.5"]);
    await server.start();
    client = new NexusClient(server.target, { timeoutMs: 20_000 });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  /** A project forming USER memories (the default), with a session of alice's holding `turns`;
   * each its own name, as a project's name is unique in its tenant. */
  let worlds = 0;
  const world = async (...turns: string[]): Promise<{ scope: memory.MemoryScope; sessionId: number }> => {
    worlds += 1;
    const project = await client.memory.createProject({ project: { name: `trailers ${worlds}` } });
    const session = await client.memory.createSession({ session: { projectId: project.id, userId: "alice" } });
    for (const turn of turns) {
      await client.memory.createEpisode({ sessionId: session.id, userMessage: turn, aiResponse: "Noted." });
    }
    return { scope: { projectId: project.id, userId: "alice" } as memory.MemoryScope, sessionId: session.id };
  };
  const drain = async <T>(stream: AsyncIterable<T>): Promise<T[]> => {
    const items: T[] = [];
    for await (const item of stream) items.push(item);
    return items;
  };
  const LLM_OFF = /^LLM_OFF: no LLM server is configured .*1 exchange waits for memory formation$/;

  test("an empty stream says why once it has ended: LLM_OFF without an LLM", async () => {
    const { scope } = await world("I'm vegetarian now.");
    const search = client.memory.searchMemories({ query: "vegetarian", scope });
    assert.equal(search.trailers, undefined, "nothing is known before the stream ends");
    assert.equal(search.emptyReason, undefined);
    assert.deepEqual(await drain(search), []);
    assert.match(search.emptyReason ?? "", LLM_OFF);
    assert.equal(search.trailers?.[EMPTY_REASON_KEY], search.emptyReason);
    assert.equal(search.degradedReason, undefined);

    const select = client.memory.selectMemories({ prompt: "what should I cook?", scope });
    assert.deepEqual(await drain(select), []);
    assert.equal(select.selectionMethod, "semantic", "said also when nothing is selected");
    assert.match(select.emptyReason ?? "", LLM_OFF);
  });

  test("a unary answer carries its trailers as properties that are not fields", async () => {
    const { scope } = await world("I'm vegetarian now.");
    const listed = await client.memory.listMemories({ scope });
    const reason: string | undefined = listed.emptyReason; // typed on the answer
    assert.match(reason ?? "", LLM_OFF);
    assert.equal(listed.trailers[EMPTY_REASON_KEY], reason);
    assert.ok(listed.trailers["x-request-id"], "every trailer is there as text");
    // Not fields: comparisons, keys and JSON see only the message.
    assert.deepStrictEqual(listed, { memories: [], nextPageToken: "" });
    assert.deepEqual(Object.keys(listed), ["memories", "nextPageToken"]);
    assert.equal(JSON.stringify(listed), '{"memories":[],"nextPageToken":""}');
  });

  test("an answer with something in it gives no emptyReason", async () => {
    const { scope, sessionId } = await world("I'm vegetarian now.");
    await client.memory.createMemory({
      memory: { kind: memory.MemoryKind.MEMORY_KIND_PROJECT, projectId: scope.projectId, title: "port", content: "Postgres runs on port 5433" },
    });
    const listed = await client.memory.listMemories({ scope });
    assert.equal(listed.memories.length, 1);
    assert.ok(listed.trailers["x-request-id"], "the trailers were read");
    assert.equal(listed.emptyReason, undefined);

    const search = client.memory.searchEpisodes({
      query: "vegetarian",
      sessionId,
      mode: memory.SearchMode.SEARCH_MODE_KEYWORD,
    });
    assert.equal((await drain(search)).length, 1);
    assert.ok(search.trailers?.["x-request-id"], "the trailers were read");
    assert.equal(search.emptyReason, undefined);
    assert.equal(search.degradedReason, undefined, "keyword search asks no reranker");
  });

  test("a second CreateMemory of the same words says the memory was already held", async () => {
    const { scope } = await world();
    const fact = { kind: memory.MemoryKind.MEMORY_KIND_PROJECT, projectId: scope.projectId, title: "deploys", content: "Deploys go out on Tuesdays" };
    const first = await client.memory.createMemory({ memory: fact });
    assert.ok(first.trailers["x-request-id"], "the trailers were read");
    assert.equal(first.existing, undefined, "a new memory was stored");
    // Each call gets its own request_id: the words alone make it the same memory.
    const again = await client.memory.createMemory({ memory: { ...fact, title: "Deploys!" } });
    assert.equal(again.id, first.id);
    assert.equal(
      again.existing,
      `memory ${first.id} already holds these words in this tier; it is returned and nothing was stored`,
    );
    assert.equal(again.trailers[EXISTING_KEY], again.existing);
  });

  test("a search the reranker could not order says why in degradedReason", async () => {
    const { sessionId } = await world("I'm vegetarian now.", "vegetarian recipes, please");
    const search = client.memory.searchEpisodes({ query: "vegetarian", sessionId });
    const hits = await drain(search);
    assert.ok(hits.length >= 1);
    assert.match(search.degradedReason ?? "", /^reranker: cannot reach http:\/\/127\.0\.0\.1:\d+\/rerank/);
    assert.equal(search.degradedReason, hits[0].degradedReason, "the trailer and the hits agree");
    assert.equal(search.trailers?.[DEGRADED_KEY], search.degradedReason);
    assert.equal(search.emptyReason, undefined);
  });

  test("a failed stream keeps its text trailers, binary ones left out; one left early has none", async () => {
    const refused = client.memory.searchMemories({ query: "x", scope: { userId: " bob" } as memory.MemoryScope });
    let error: unknown;
    await drain(refused).catch((e: unknown) => (error = e));
    assert.ok(error instanceof NexusInvalidArgument, String(error));
    assert.equal(error.metadata?.get(STATUS_DETAILS_KEY).length, 1, "the server sent its binary details");
    assert.ok(refused.trailers, "a failed stream has ended too");
    assert.equal(refused.trailers[STATUS_DETAILS_KEY], undefined);
    assert.equal(refused.trailers["x-request-id"], error.requestId);

    const { sessionId } = await world("apples are red", "apples grow on trees");
    const search = client.memory.searchEpisodes({
      query: "apples",
      sessionId,
      mode: memory.SearchMode.SEARCH_MODE_KEYWORD,
    });
    for await (const _ of search) break; // leaving early cancels the call
    assert.equal(search.trailers, undefined, "what the server would have sent is not known");
  });
});

describe("retries through a server restart", () => {
  const server = new Server();

  after(() => server.stop());

  test("creates in flight across kill -9 and restart all succeed, none duplicated", async () => {
    await server.start(await freePort());
    // waitForReady: calls issued while the server is down wait for it instead of
    // failing; calls cut off mid-flight come back UNAVAILABLE and the retry policy
    // resends them with the same request_id.
    const client = new NexusClient(server.target, { waitForReady: true, timeoutMs: 30_000 });
    let restarted: Promise<void> | undefined;
    try {
      const session = await client.memory.createSession({ session: { name: "restart" } });
      const total = 40;
      let done = 0;
      const calls = Array.from({ length: total }, (_, i) =>
        (async () => {
          // Spread the calls out so some land before, during and after the restart.
          await new Promise((r) => setTimeout(r, i * 25));
          const episode = await client.memory.createEpisode({ sessionId: session.id, userMessage: `m${i}` });
          done += 1;
          if (done === 10) restarted = server.restart();
          return episode;
        })(),
      );
      const episodes = await Promise.all(calls);
      assert.ok(restarted, "the server was killed mid-run");
      await restarted;
      const ids = new Set(episodes.map((e) => e.id));
      assert.equal(ids.size, total, "every call got its own episode");
      const listed = await client.memory.listEpisodes({ sessionId: session.id, pageSize: 100 });
      assert.equal(listed.episodes.length, total, "no create was stored twice");
      assert.deepEqual(
        listed.episodes.map((e) => e.userMessage).sort(),
        Array.from({ length: total }, (_, i) => `m${i}`).sort(),
      );
    } finally {
      client.close();
      await restarted?.catch(() => undefined);
    }
  });
});

describe("against a TLS server that requires a client certificate and an API key", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "nexus-ts-certs-"));
  const file = (name: string): string => path.join(dir, name);
  const openssl = (...args: string[]): void => {
    execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  };
  const issue = (name: string, cn: string, ext: string): void => {
    writeFileSync(file(`${name}.ext`), `${ext}\n`);
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
      "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`);
    openssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key",
      "-CAcreateserial", "-days", "2", "-out", `${name}.pem`, "-extfile", `${name}.ext`);
  };
  openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=nexus ts test CA");
  issue("server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth");
  issue("client", "orchestrator", "extendedKeyUsage=clientAuth");
  const apiKey = "ts-client-test-key-0001";
  writeFileSync(file("keys.json"), JSON.stringify({ keys: [{ key: apiKey, name: "ts", users: "*" }] }));
  const server = new Server([
    "--tls-cert", file("server.pem"), "--tls-key", file("server.key"),
    "--tls-client-ca", file("ca.pem"), "--auth-keys-file", file("keys.json"),
  ]);
  const mtls = (): { rootCerts: Buffer; privateKey: Buffer; certChain: Buffer } => ({
    rootCerts: readFileSync(file("ca.pem")),
    privateKey: readFileSync(file("client.key")),
    certChain: readFileSync(file("client.pem")),
  });

  before(() => server.start());
  after(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("mTLS with the key is served", async () => {
    const client = new NexusClient(server.target, { tls: mtls(), apiKey });
    try {
      const status = await client.memory.getServiceStatus({});
      assert.ok(status.schemaVersion > 0);
    } finally {
      client.close();
    }
  });

  test("without the key the call is UNAUTHENTICATED", async () => {
    const client = new NexusClient(server.target, { tls: mtls() });
    try {
      await assert.rejects(client.memory.getServiceStatus({}), (error: unknown) => {
        assert.ok(error instanceof NexusUnauthenticated, String(error));
        assert.equal(error.code, Status.UNAUTHENTICATED);
        assert.equal(error.errorInfo?.reason, "API_KEY_MISSING");
        return true;
      });
    } finally {
      client.close();
    }
  });

  test("without a client certificate no connection is made", async () => {
    const client = new NexusClient(server.target, {
      tls: { rootCerts: readFileSync(file("ca.pem")) },
      apiKey,
      retry: false,
    });
    try {
      await assert.rejects(client.memory.getServiceStatus({}), (error: unknown) => {
        return error instanceof NexusError && error.code === Status.UNAVAILABLE;
      });
    } finally {
      client.close();
    }
  });
});

describe("round robin over two instances, one of which stops serving", () => {
  const instances = new Instances();
  let client: NexusClient;

  before(async () => {
    await instances.start();
    // No retries: a call sent to the instance that is down would fail, not be
    // sent again elsewhere.
    client = new NexusClient(`ipv4:${instances.a},${instances.b}`, {
      loadBalancing: "round_robin",
      retry: false,
      timeoutMs: 10_000,
    });
    // Round robin starts on the first address that connects: let both connect.
    for (let i = 0; i < 4; i++) await client.memory.listProjects({}, { waitForReady: true });
  });
  after(async () => {
    client?.close();
    await instances.stop();
  });

  const createAll = async (n: number): Promise<boolean> => {
    let ok = true;
    for (let i = 0; i < n; i++) {
      try {
        await client.memory.createSession({});
      } catch {
        ok = false;
      }
    }
    return ok;
  };
  const count = async (): Promise<{ a: number | null; b: number }> =>
    (await instances.send("count")) as { a: number | null; b: number };
  const eventually = async (check: () => Promise<boolean>): Promise<void> => {
    const deadline = Date.now() + 20_000;
    while (!(await check())) {
      assert.ok(Date.now() < deadline, "condition not met in time");
    }
  };

  test("calls go around an instance whose health says NOT_SERVING, and back once it serves", async () => {
    assert.ok(await createAll(6));
    const before = await count();
    assert.ok((before.a ?? 0) >= 2 && before.b >= 2, `spread over both: ${JSON.stringify(before)}`);

    assert.deepEqual(await instances.send("down"), { a: "NOT_SERVING" });
    // The client's own health watch on a hears it at once, or a moment later.
    await eventually(() => createAll(4));
    const seen = await count();
    assert.ok(await createAll(20), "no call reaches the instance that is not serving");
    assert.deepEqual(await count(), { a: null, b: seen.b + 20 });

    assert.deepEqual(await instances.send("up"), { a: "SERVING" });
    await eventually(async () => {
      assert.ok(await createAll(4));
      return ((await count()).a ?? 0) > (before.a ?? 0);
    });
  });
});
