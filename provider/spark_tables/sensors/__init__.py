"""Sensors of this provider: the full-cache reload sensor of lookup tables."""
