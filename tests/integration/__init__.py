"""Integration tier: one adapter or the store against its real counterpart."""
