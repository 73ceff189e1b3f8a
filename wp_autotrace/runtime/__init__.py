"""The host side: what runs inside every traced process (see common/__init__.py for the layer rule)."""
