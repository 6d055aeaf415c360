export { NexusClient } from "./client";
export type { CallOptions, NexusClientOptions, ServerStream, ServiceClient, TlsOptions } from "./client";
export { NexusError } from "./errors";
export { DEFAULT_RETRY_POLICY, retryableMethods, serviceConfig } from "./retry";
export type { RetryPolicy } from "./retry";
export { status as Status, Metadata } from "@grpc/grpc-js";
export * as memory from "./gen/nexus/memory/v1/memory_service";
export * as graph from "./gen/nexus/graph/v1/graph_service";
export * as summary from "./gen/nexus/summary/v1/summary_service";
