"""Discovery sources: read-only, each returns typed records and warnings."""
