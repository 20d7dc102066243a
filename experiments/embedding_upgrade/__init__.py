"""Upgrading a real text-embedding model without re-indexing (bcjax.upgrade on real models)."""
