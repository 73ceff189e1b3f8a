# A stale `typing` backport (3.7.4.3) as a test venv held it: under Python 3.11 it cannot import. The main
# process imported the standard library's typing long before this folder joined sys.path; a fresh interpreter
# that puts this folder first (the compile sidecar gets sys.path as PYTHONPATH) imports this one and fails.
raise ImportError("typing 3.7.4.3 backport: incompatible with this Python")
