"""Empty on purpose: this file's pyc slot is where the package's loader (``__init__.py``) keeps
the start pack.

The pack (the start modules' code objects) lives at ``__pycache__/_startpack.<cache tag>.pyc``, the path
``cache_from_source`` gives this file, so that ``pip uninstall`` removes it with the package: pip removes
each shipped source's pyc path, and a file of any other name would be left behind in ``__pycache__``
(with the package folder around it). Nothing imports this module; if something did, importlib would
find the pack no valid pyc, compile this file and write its pyc there, and the next traced start would
write the pack again.
"""
