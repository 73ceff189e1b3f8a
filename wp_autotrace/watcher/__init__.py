"""The watcher: its own process, started by the root (runtime/spawn.py), sampling the run's tree."""
