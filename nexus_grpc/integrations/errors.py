"""``nexus_grpc.integrations.errors`` before issue 48, now ``conventional_errors``.

Kept while branches written against the old path merge; issue 48's second
wave removes it.
"""

from nexus_grpc.integrations.conventional_errors import *  # noqa: F403
from nexus_grpc.integrations.conventional_errors import __all__ as __all__
