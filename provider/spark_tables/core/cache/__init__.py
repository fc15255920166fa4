"""Cached tables (FLIP-36): declarations, the descriptors of their copies, and where copies live."""
