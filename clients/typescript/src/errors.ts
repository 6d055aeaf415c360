import * as grpc from "@grpc/grpc-js";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** A request field a call was refused for (google.rpc.BadRequest.FieldViolation). */
export interface FieldViolation {
  /** The field's path in the request, in the proto's names: "memory.title", "scope.user_id". */
  field: string;
  description: string;
}

/** A limit a call met (google.rpc.QuotaFailure.Violation). */
export interface QuotaViolation {
  /** Whose limit: "server", "api_key:NAME", "user:alice project:3 agent:". */
  subject: string;
  description: string;
  /** Which limit, as its flag names it where it has one: "max-concurrent-rpcs-per-key". */
  quotaId: string;
  /** The limit itself. */
  quotaValue: number;
}

/** A state a call needed and did not find (google.rpc.PreconditionFailure.Violation). */
export interface PreconditionViolation {
  type: string;
  subject: string;
  description: string;
}

/** The resource a call was about (google.rpc.ResourceInfo); for NOT_FOUND, the missing one. */
export interface ResourceInfo {
  /** The API's noun: "session", "memory", "entity". */
  resourceType: string;
  /** Its id. */
  resourceName: string;
  owner: string;
  description: string;
}

/** Why, as a stable constant to switch on (google.rpc.ErrorInfo). */
export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

/** A detail of the status this client does not decode, as it came. */
export interface UnknownDetail {
  typeUrl: string;
  value: Uint8Array;
}

/** What the `grpc-status-details-bin` trailer of a failed call said, decoded. */
export interface StatusDetails {
  fieldViolations: FieldViolation[];
  quotaViolations: QuotaViolation[];
  preconditionViolations: PreconditionViolation[];
  resourceInfo: ResourceInfo[];
  errorInfo: ErrorInfo[];
  unknown: UnknownDetail[];
}

export const STATUS_DETAILS_KEY = "grpc-status-details-bin";
const TYPE_PREFIX = "type.googleapis.com/";

function emptyDetails(): StatusDetails {
  return {
    fieldViolations: [],
    quotaViolations: [],
    preconditionViolations: [],
    resourceInfo: [],
    errorInfo: [],
    unknown: [],
  };
}

type Value = Uint8Array | bigint | string | number;

/** A message's fields by number (repeated ones in order): all the google.rpc
 * messages below need, without generating them. */
function fieldsOf(bytes: Uint8Array): Map<number, Value[]> {
  const reader = new BinaryReader(bytes);
  const out = new Map<number, Value[]>();
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    let value: Value;
    if (wireType === WireType.LengthDelimited) value = reader.bytes();
    else if (wireType === WireType.Varint) value = reader.int64();
    else {
      reader.skip(wireType, no);
      continue;
    }
    const list = out.get(no);
    if (list) list.push(value);
    else out.set(no, [value]);
  }
  return out;
}

const utf8 = new TextDecoder();

function text(fields: Map<number, Value[]>, no: number): string {
  const value = fields.get(no)?.at(-1);
  return value instanceof Uint8Array ? utf8.decode(value) : "";
}

function integer(fields: Map<number, Value[]>, no: number): number {
  const value = fields.get(no)?.at(-1);
  return value === undefined || value instanceof Uint8Array ? 0 : Number(value);
}

function messages(fields: Map<number, Value[]>, no: number): Map<number, Value[]>[] {
  return (fields.get(no) ?? []).filter((v): v is Uint8Array => v instanceof Uint8Array).map(fieldsOf);
}

/** Decodes a serialized google.rpc.Status into the details this client knows. */
export function decodeStatusDetails(bytes: Uint8Array): { code: number; message: string; details: StatusDetails } {
  const status = fieldsOf(bytes);
  const details = emptyDetails();
  for (const any of messages(status, 3)) {
    const typeUrl = text(any, 1);
    const raw = any.get(2)?.at(-1);
    const value = raw instanceof Uint8Array ? raw : new Uint8Array();
    const body = fieldsOf(value);
    switch (typeUrl.startsWith(TYPE_PREFIX) ? typeUrl.slice(TYPE_PREFIX.length) : typeUrl) {
      case "google.rpc.BadRequest":
        for (const v of messages(body, 1)) details.fieldViolations.push({ field: text(v, 1), description: text(v, 2) });
        break;
      case "google.rpc.QuotaFailure":
        for (const v of messages(body, 1)) {
          details.quotaViolations.push({
            subject: text(v, 1),
            description: text(v, 2),
            quotaId: text(v, 5),
            quotaValue: integer(v, 7),
          });
        }
        break;
      case "google.rpc.PreconditionFailure":
        for (const v of messages(body, 1)) {
          details.preconditionViolations.push({ type: text(v, 1), subject: text(v, 2), description: text(v, 3) });
        }
        break;
      case "google.rpc.ResourceInfo":
        details.resourceInfo.push({
          resourceType: text(body, 1),
          resourceName: text(body, 2),
          owner: text(body, 3),
          description: text(body, 4),
        });
        break;
      case "google.rpc.ErrorInfo": {
        const metadata: Record<string, string> = {};
        for (const entry of messages(body, 3)) metadata[text(entry, 1)] = text(entry, 2);
        details.errorInfo.push({ reason: text(body, 1), domain: text(body, 2), metadata });
        break;
      }
      default:
        details.unknown.push({ typeUrl, value });
    }
  }
  return { code: integer(status, 1), message: text(status, 2), details };
}

/** The details in `metadata`'s status trailer; empty when there is none, or
 * when it is malformed or contradicts the call's own code (a proxy between
 * may have rewritten one and not the other). */
function detailsFrom(code: grpc.status, metadata: grpc.Metadata | undefined): StatusDetails {
  const raw = metadata?.get(STATUS_DETAILS_KEY)[0];
  if (raw === undefined || typeof raw === "string") return emptyDetails();
  try {
    const decoded = decodeStatusDetails(raw);
    return decoded.code === code ? decoded.details : emptyDetails();
  } catch {
    return emptyDetails();
  }
}

/**
 * A failed call: the gRPC status code (and its name), the server's message and
 * request id, and the status's google.rpc error details. `NexusError.from`
 * (which the client uses) gives the subclass for the code, e.g.
 * `NexusInvalidArgument`; every one is a `NexusError`.
 */
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
  /** Everything the status details said (see the accessors below). */
  readonly statusDetails: StatusDetails;

  constructor(code: grpc.status, details: string, metadata?: grpc.Metadata) {
    const codeName = grpc.status[code] ?? String(code);
    const rid = metadata?.get("x-request-id")[0];
    const requestId = rid === undefined ? undefined : String(rid);
    super(`${codeName}: ${details}${requestId ? ` (request id ${requestId})` : ""}`);
    this.name = new.target.name;
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.requestId = requestId;
    this.metadata = metadata;
    this.statusDetails = detailsFrom(code, metadata);
  }

  /** The request fields the call was refused for (google.rpc.BadRequest). */
  get fieldViolations(): FieldViolation[] {
    return this.statusDetails.fieldViolations;
  }

  /** The limits the call met (google.rpc.QuotaFailure). */
  get quotaViolations(): QuotaViolation[] {
    return this.statusDetails.quotaViolations;
  }

  /** The states the call needed (google.rpc.PreconditionFailure). */
  get preconditionViolations(): PreconditionViolation[] {
    return this.statusDetails.preconditionViolations;
  }

  /** The resource the call was about (google.rpc.ResourceInfo), the first when several came. */
  get resourceInfo(): ResourceInfo | undefined {
    return this.statusDetails.resourceInfo[0];
  }

  /** The reason, as a constant to switch on (google.rpc.ErrorInfo). */
  get errorInfo(): ErrorInfo | undefined {
    return this.statusDetails.errorInfo[0];
  }

  /** The error for `code`: the subclass for it when there is one. */
  static of(code: grpc.status, details: string, metadata?: grpc.Metadata): NexusError {
    const Type = BY_CODE.get(code) ?? NexusError;
    return new Type(code, details, metadata);
  }

  static from(error: Partial<grpc.ServiceError>): NexusError {
    if (error instanceof NexusError) return error;
    const code = typeof error.code === "number" ? error.code : grpc.status.UNKNOWN;
    return NexusError.of(code, error.details ?? error.message ?? "", error.metadata);
  }
}

/** INVALID_ARGUMENT: `fieldViolations` names the fields to fix. */
export class NexusInvalidArgument extends NexusError {}
/** NOT_FOUND: `resourceInfo` names what does not exist. */
export class NexusNotFound extends NexusError {}
export class NexusAlreadyExists extends NexusError {}
/** FAILED_PRECONDITION (the memory cap's carries `quotaViolations`). */
export class NexusFailedPrecondition extends NexusError {}
/** RESOURCE_EXHAUSTED: `quotaViolations` names the limit met. */
export class NexusResourceExhausted extends NexusError {}
/** PERMISSION_DENIED: `errorInfo` says why. */
export class NexusPermissionDenied extends NexusError {}
/** UNAUTHENTICATED: `errorInfo` says whether the key was missing or unknown. */
export class NexusUnauthenticated extends NexusError {}
/** UNAVAILABLE: the server or one of its dependencies is down; retry later. */
export class NexusUnavailable extends NexusError {}
export class NexusDeadlineExceeded extends NexusError {}
export class NexusCancelled extends NexusError {}
/** UNIMPLEMENTED: the server does not have this RPC (an older server). */
export class NexusUnimplemented extends NexusError {}
/** INTERNAL: the server failed; its log has the request id. */
export class NexusInternal extends NexusError {}

const BY_CODE = new Map<grpc.status, new (code: grpc.status, details: string, metadata?: grpc.Metadata) => NexusError>([
  [grpc.status.INVALID_ARGUMENT, NexusInvalidArgument],
  [grpc.status.NOT_FOUND, NexusNotFound],
  [grpc.status.ALREADY_EXISTS, NexusAlreadyExists],
  [grpc.status.FAILED_PRECONDITION, NexusFailedPrecondition],
  [grpc.status.RESOURCE_EXHAUSTED, NexusResourceExhausted],
  [grpc.status.PERMISSION_DENIED, NexusPermissionDenied],
  [grpc.status.UNAUTHENTICATED, NexusUnauthenticated],
  [grpc.status.UNAVAILABLE, NexusUnavailable],
  [grpc.status.DEADLINE_EXCEEDED, NexusDeadlineExceeded],
  [grpc.status.CANCELLED, NexusCancelled],
  [grpc.status.UNIMPLEMENTED, NexusUnimplemented],
  [grpc.status.INTERNAL, NexusInternal],
]);
