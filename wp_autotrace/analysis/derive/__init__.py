"""Stage 3, derive: figures read off the model (each pool's story, how each process ended, launches, labels)."""
