"""What every layer may use: the service's own types and the primitives that
cross layers without belonging to any one of them.

- ``models``: the service's vocabulary (sessions, episodes, job states...),
  independent of protobuf and SQL; the store builds them, the domain decides
  with them, the servicers translate them.
- ``tenancy``: the caller's tenant, a context variable.
- ``requests``: the request id of the RPC in progress and the observer hook
  that metrics implement.
- ``signals``: in-process wake-ups for job workers.
- ``events``: the broadcaster that feeds watch streams.

Nothing here imports another nexus_grpc package except ``errors``: the
import-linter contracts in pyproject.toml keep it so.
"""
