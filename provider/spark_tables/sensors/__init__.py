"""Sensors of this provider (the full-cache reload sensor lands with lookup caches)."""
