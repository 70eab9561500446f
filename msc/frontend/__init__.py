"""Frontends: translate a source framework's model into an msc Graph."""
