"""Offline analysis: log -> model -> findings -> report dict -> text and exports. Never imported by a host."""
