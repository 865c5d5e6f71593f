"""Ingest: read and check stored attempts, then normalize them into the store's tables."""
