"""XCom backends of this provider: the cache registry of cached tables."""
