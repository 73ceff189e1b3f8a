"""wp-autotrace: see which processes start PyTorch inductor's compile pools, and why.

Install it, then run an unmodified program with ``WP_AUTOTRACE=1``; the
``.pth`` file installed beside the package activates tracing in every
Python process of the run. Nothing here stays imported when tracing is off.

PYTEST_DONT_REWRITE: a traced pytest session loads wp_autotrace.pytest_plugin and would warn
that this package was imported (by the .pth) before it could rewrite its asserts: a difference
on the host's output. Nothing here needs rewriting.
"""

__version__ = "0.1.0"
