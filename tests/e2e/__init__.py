"""End-to-end tier: the whole service, over real gRPC."""
