"""Presenters: the report laid out as text, as an HTML page and its SVG; they read the report, never write it."""
