import * as grpc from "@grpc/grpc-js";

/** A failed call: the gRPC status code (and its name), the server's message and request id. */
export class NexusError extends Error {
  /** The numeric gRPC status code; compare it with `grpc.status` / `Status`. */
  readonly code: grpc.status;
  /** The status code's name, e.g. "NOT_FOUND". */
  readonly codeName: string;
  /** The server's message, which names what was wrong. */
  readonly details: string;
  /** The server's `x-request-id` for this call, to find its log lines. */
  readonly requestId: string | undefined;
  readonly metadata: grpc.Metadata | undefined;

  constructor(code: grpc.status, details: string, metadata?: grpc.Metadata) {
    const codeName = grpc.status[code] ?? String(code);
    const rid = metadata?.get("x-request-id")[0];
    const requestId = rid === undefined ? undefined : String(rid);
    super(`${codeName}: ${details}${requestId ? ` (request id ${requestId})` : ""}`);
    this.name = "NexusError";
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.requestId = requestId;
    this.metadata = metadata;
  }

  static from(error: Partial<grpc.ServiceError>): NexusError {
    if (error instanceof NexusError) return error;
    const code = typeof error.code === "number" ? error.code : grpc.status.UNKNOWN;
    return new NexusError(code, error.details ?? error.message ?? "", error.metadata);
  }
}
