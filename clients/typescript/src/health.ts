/**
 * Client-side health checking (gRFC A17) for grpc-js, which does not implement
 * the service config's `healthCheckConfig` (1.14 drops the key).
 *
 * A load balancing policy, `nexus_health_checked_round_robin`: round robin over
 * every address the target resolves to, where each connection also watches
 * `grpc.health.v1.Health/Watch` for the configured service name ("" is the whole
 * server) on that same connection. While an instance says NOT_SERVING (as a
 * nexus-grpc server does while its database does not answer), its connection is
 * reported unhealthy and round robin picks the others; SERVING makes it
 * eligible again. A server without the health service (UNIMPLEMENTED) counts
 * as healthy, as A17 says. Unlike A17, a new connection is used before its
 * first health answer: a call queued behind that answer would wait a round trip
 * on every reconnect, and a server that has just started is serving.
 */
import * as grpc from "@grpc/grpc-js";
import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";

export const HEALTH_CHECKED_ROUND_ROBIN = "nexus_health_checked_round_robin";

const WATCH = "/grpc.health.v1.Health/Watch";
const SERVING = 1; // HealthCheckResponse.ServingStatus.SERVING
const RETRY_MS = 1_000;

const {
  BaseSubchannelWrapper,
  ChildLoadBalancerHandler,
  createChildChannelControlHelper,
  parseLoadBalancingConfig,
  registerLoadBalancerType,
} = grpc.experimental;

type Endpoint = grpc.experimental.Endpoint;
type Picker = grpc.experimental.Picker;
type PickArgs = grpc.experimental.PickArgs;
type PickResult = grpc.experimental.PickResult;
type SubchannelInterface = grpc.experimental.SubchannelInterface;
type ChannelControlHelper = grpc.experimental.ChannelControlHelper;
type TypedLoadBalancingConfig = grpc.experimental.TypedLoadBalancingConfig;
type StatusOr<T> = grpc.experimental.StatusOr<T>;

function encodeRequest(service: string): Buffer {
  const writer = new BinaryWriter();
  if (service) writer.uint32(10).string(service);
  return Buffer.from(writer.finish());
}

function decodeStatus(bytes: Buffer): number {
  const reader = new BinaryReader(bytes);
  let status = 0;
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === 0) status = reader.int32();
    else reader.skip(tag & 7);
  }
  return status;
}

/** A connection whose health is what its server's Health/Watch says. */
class HealthCheckedSubchannel extends BaseSubchannelWrapper {
  private call: grpc.ClientReadableStream<number> | null = null;
  private retry: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly onState = (
    _subchannel: SubchannelInterface,
    _previous: grpc.connectivityState,
    state: grpc.connectivityState,
  ): void => {
    if (state === grpc.connectivityState.READY) this.watch();
    else this.unwatch();
  };

  constructor(
    child: SubchannelInterface,
    private readonly serviceName: string,
  ) {
    super(child);
    child.addConnectivityStateListener(this.onState);
    if (child.getConnectivityState() === grpc.connectivityState.READY) this.watch();
  }

  unwrap(): SubchannelInterface {
    return this.child;
  }

  private watch(): void {
    if (this.call || this.closed) return;
    const client = new grpc.Client("unused", grpc.credentials.createInsecure(), {
      channelOverride: this.child.getChannel(),
    });
    const call = client.makeServerStreamRequest(
      WATCH,
      (service: string) => encodeRequest(service),
      (bytes: Buffer) => decodeStatus(bytes),
      this.serviceName,
    );
    this.call = call;
    call.on("data", (status: number) => this.setHealthy(status === SERVING));
    call.on("error", (error: grpc.ServiceError) => {
      // No health service there: nothing says it is not serving (A17).
      if (error.code === grpc.status.UNIMPLEMENTED) this.setHealthy(true);
    });
    call.on("close", () => {
      if (this.call !== call) return;
      this.call = null;
      // The stream ended on a live connection (the server restarted its
      // health service, or it ended the stream): watch again shortly.
      if (!this.closed && this.child.getConnectivityState() === grpc.connectivityState.READY) {
        this.retry = setTimeout(() => {
          this.retry = null;
          if (this.child.getConnectivityState() === grpc.connectivityState.READY) this.watch();
        }, RETRY_MS);
        this.retry.unref();
      }
    });
  }

  private unwatch(): void {
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    const call = this.call;
    this.call = null;
    call?.cancel();
  }

  protected override destroy(): void {
    this.closed = true;
    this.child.removeConnectivityStateListener(this.onState);
    this.unwatch();
    super.destroy();
  }
}

class HealthCheckedRoundRobinConfig implements TypedLoadBalancingConfig {
  constructor(readonly serviceName: string) {}

  getLoadBalancerName(): string {
    return HEALTH_CHECKED_ROUND_ROBIN;
  }

  toJsonObject(): object {
    return { [HEALTH_CHECKED_ROUND_ROBIN]: { serviceName: this.serviceName } };
  }

  static createFromJson(obj: unknown): HealthCheckedRoundRobinConfig {
    const name = (obj as { serviceName?: unknown } | null)?.serviceName ?? "";
    if (typeof name !== "string") throw new Error("serviceName must be a string");
    return new HealthCheckedRoundRobinConfig(name);
  }
}

/** Hands the channel the connection itself, not this policy's wrapper of it. */
class UnwrappingPicker implements Picker {
  constructor(private readonly picker: Picker) {}

  pick(args: PickArgs): PickResult {
    const result = this.picker.pick(args);
    if (result.subchannel instanceof HealthCheckedSubchannel) {
      return { ...result, subchannel: result.subchannel.unwrap() };
    }
    return result;
  }
}

class HealthCheckedRoundRobin implements grpc.experimental.LoadBalancer {
  private readonly child: InstanceType<typeof ChildLoadBalancerHandler>;
  private serviceName = "";

  constructor(helper: ChannelControlHelper) {
    this.child = new ChildLoadBalancerHandler(
      createChildChannelControlHelper(helper, {
        createSubchannel: (address, args) =>
          new HealthCheckedSubchannel(helper.createSubchannel(address, args), this.serviceName),
        updateState: (state, picker, error) =>
          helper.updateState(state, new UnwrappingPicker(picker), error),
      }),
    );
  }

  updateAddressList(
    endpoints: StatusOr<Endpoint[]>,
    config: TypedLoadBalancingConfig,
    options: grpc.ChannelOptions,
    resolutionNote: string,
  ): boolean {
    if (!(config instanceof HealthCheckedRoundRobinConfig)) return false;
    this.serviceName = config.serviceName;
    return this.child.updateAddressList(
      endpoints,
      parseLoadBalancingConfig({ round_robin: {} }),
      options,
      resolutionNote,
    );
  }

  exitIdle(): void {
    this.child.exitIdle();
  }

  resetBackoff(): void {
    this.child.resetBackoff();
  }

  destroy(): void {
    this.child.destroy();
  }

  getTypeName(): string {
    return HEALTH_CHECKED_ROUND_ROBIN;
  }
}

let registered = false;

/** Makes the policy available to every channel of this process (idempotent). */
export function registerHealthCheckedRoundRobin(): void {
  if (registered) return;
  registerLoadBalancerType(
    HEALTH_CHECKED_ROUND_ROBIN,
    HealthCheckedRoundRobin,
    HealthCheckedRoundRobinConfig,
  );
  registered = true;
}
