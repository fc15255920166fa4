"""XCom backends of this provider (the cache registry lands with cached tables)."""
