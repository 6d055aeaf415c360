export { NexusClient } from "./client";
export {
  DEGRADED_KEY,
  EMPTY_REASON_KEY,
  EXISTING_KEY,
  SELECTION_METHOD_KEY,
} from "./client";
export type {
  Answer,
  CallOptions,
  NexusClientOptions,
  ServerStream,
  ServiceClient,
  TlsOptions,
  Trailed,
  TrailerReasons,
} from "./client";
export {
  NexusError,
  NexusAlreadyExists,
  NexusCancelled,
  NexusDeadlineExceeded,
  NexusFailedPrecondition,
  NexusInternal,
  NexusInvalidArgument,
  NexusNotFound,
  NexusPermissionDenied,
  NexusResourceExhausted,
  NexusUnauthenticated,
  NexusUnavailable,
  NexusUnimplemented,
  STATUS_DETAILS_KEY,
  decodeStatusDetails,
} from "./errors";
export type {
  ErrorInfo,
  FieldViolation,
  PreconditionViolation,
  QuotaViolation,
  ResourceInfo,
  StatusDetails,
  UnknownDetail,
} from "./errors";
export { DEFAULT_RETRY_POLICY, HEALTH_SERVICE_NAME, retryableMethods, serviceConfig } from "./retry";
export { HEALTH_CHECKED_ROUND_ROBIN, registerHealthCheckedRoundRobin } from "./health";
export type { RetryPolicy } from "./retry";
export { status as Status, Metadata } from "@grpc/grpc-js";
export * as memory from "./gen/nexus/memory/v1/memory_service";
export * as graph from "./gen/nexus/graph/v1/graph_service";
export * as summary from "./gen/nexus/summary/v1/summary_service";
