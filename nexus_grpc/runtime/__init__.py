"""What every layer may use at run time: the settings (``config``), TLS
files, call deadlines, OpenTelemetry tracing and event-loop lag. It imports
nothing of the service above ``core``."""
