"""How the server shows itself: logs, Prometheus metrics, and the heap
profile dump (SIGUSR2)."""
