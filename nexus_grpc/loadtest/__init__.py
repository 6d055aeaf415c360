"""Driving a real server from outside: the one launcher and the one load loop.

``launcher.ServerProcess`` starts ``nexus-grpc serve`` as a subprocess and stops or
kills it; ``loop.drive`` runs N concurrent callers for a duration and records each
call's latency.  ``nexus-grpc bench``, ``make bench`` (bench/run_benchmarks.py),
bench/profile_search.py and the process-based tests share them.  Client side only:
nothing here imports the server's code or needs the ``[server]`` extra.
"""
