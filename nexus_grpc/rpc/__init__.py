"""The gRPC edge shared by the servicers, the interceptors and the server:
the request context (``requests``), domain errors as rich statuses
(``error_status``), the interceptor base (``interception``) and API-key
authentication (``auth``). Nothing below the servicers imports grpc."""
