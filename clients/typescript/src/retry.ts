import { HEALTH_CHECKED_ROUND_ROBIN } from "./health";

/**
 * The gRPC service config that makes grpc-js itself retry (gRFC A6): backoff,
 * a bounded number of attempts, and `grpc-retry-pushback-ms` honoured.
 */

export interface RetryPolicy {
  /** Attempts in all, the first included (grpc-js allows at most 5). */
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  backoffMultiplier: number;
  /**
   * UNAVAILABLE: no server answered (down, restarting, draining).
   * RESOURCE_EXHAUSTED: our server sends it only at a concurrency limit and
   * says to retry with backoff. A request too large for the server is also
   * RESOURCE_EXHAUSTED, but it is over grpc's retry buffer and never replayed.
   */
  retryableStatusCodes: string[];
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 5,
  initialBackoffMs: 100,
  maxBackoffMs: 5_000,
  backoffMultiplier: 2,
  retryableStatusCodes: ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
};

/** Reads change nothing, so a repeat is harmless. */
const READ_PREFIXES = ["Get", "List", "Search", "Select", "Watch", "Export"];

interface Definition {
  readonly fullName: string;
  readonly methods: {
    readonly [key: string]: {
      readonly name: string;
      readonly requestType: { fromPartial(object: never): unknown };
    };
  };
}

/**
 * The methods safe to repeat: reads, and writes whose request carries a
 * request_id (the server returns the first result for a repeated id, and the
 * client fills one in when the caller leaves it empty). Updates, deletes,
 * upserts and LLM-backed summaries are not retried.
 */
export function retryableMethods(definitions: Definition[]): Array<{ service: string; method: string }> {
  const out: Array<{ service: string; method: string }> = [];
  for (const definition of definitions) {
    for (const method of Object.values(definition.methods)) {
      const read = READ_PREFIXES.some((prefix) => method.name.startsWith(prefix));
      const deduplicated = "requestId" in (method.requestType.fromPartial({} as never) as object);
      if (read || deduplicated) out.push({ service: definition.fullName, method: method.name });
    }
  }
  return out;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(3).replace(/\.?0+$/, "")}s`;

/** The health a client checks: the whole server's, which turns NOT_SERVING while its database is away. */
export const HEALTH_SERVICE_NAME = "";

/**
 * The service config: retries for `methods` (none: no retry policy), and, with
 * round robin, client-side health checking. `healthCheckConfig` is gRFC A17's
 * key, as the Python client sends it; grpc-js ignores it, so the round robin
 * it asks for is health.ts's policy, which does the checking.
 */
export function serviceConfig(
  methods: Array<{ service: string; method: string }>,
  overrides: Partial<RetryPolicy> = {},
  loadBalancing: "pick_first" | "round_robin" = "pick_first",
): object {
  const policy = { ...DEFAULT_RETRY_POLICY, ...overrides };
  const config: Record<string, unknown> = {
    healthCheckConfig: { serviceName: HEALTH_SERVICE_NAME },
  };
  if (loadBalancing === "round_robin") {
    config.loadBalancingConfig = [
      { [HEALTH_CHECKED_ROUND_ROBIN]: { serviceName: HEALTH_SERVICE_NAME } },
    ];
  }
  if (methods.length > 0) {
    config.methodConfig = [
      {
        name: methods,
        retryPolicy: {
          maxAttempts: policy.maxAttempts,
          initialBackoff: seconds(policy.initialBackoffMs),
          maxBackoff: seconds(policy.maxBackoffMs),
          backoffMultiplier: policy.backoffMultiplier,
          retryableStatusCodes: policy.retryableStatusCodes,
        },
      },
    ];
  }
  return config;
}
