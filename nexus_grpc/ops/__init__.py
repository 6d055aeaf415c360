"""Operator commands run by ``nexus-grpc`` (cli.py): ``export``/``import``/
``copy`` (transfer), ``migrate-store``, ``doctor``, ``reindex`` and ``bench``."""
