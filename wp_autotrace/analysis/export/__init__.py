"""The last stage, export: the model written for other tools (Chrome trace, OTLP), in chunks as it is made."""
