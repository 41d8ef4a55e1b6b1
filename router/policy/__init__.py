"""Routing policies: small typed classes with one scoring method, and their registry."""
