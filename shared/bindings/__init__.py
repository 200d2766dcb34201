"""Transports: JSON-RPC over HTTP and the HTTP routes (agent card, legacy endpoints)."""
