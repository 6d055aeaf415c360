"""``nexus_grpc.connection`` of earlier releases, now ``nexus_grpc.client.connection``.

Kept so that code written against the old path (``from nexus_grpc.connection
import open_channel``) keeps working; new code imports the client package.
"""

from nexus_grpc.client.connection import *  # noqa: F403
from nexus_grpc.client.connection import __all__ as __all__
