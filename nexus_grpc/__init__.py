"""nexus-grpc: an async gRPC memory service for AI assistants."""
