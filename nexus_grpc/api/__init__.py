"""Servicers: translate protobuf to domain calls and back; nothing else."""
