"""Recall evaluation: long public conversations stored through the public API, then asked."""
