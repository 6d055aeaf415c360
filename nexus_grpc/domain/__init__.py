"""Use cases: validation, scope resolution and the rules of the service."""
