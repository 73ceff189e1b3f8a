"""Stage 1, read: log files into checked records (the schema, its checks, the streaming reader and its fast path)."""
