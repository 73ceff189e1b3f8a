"""wp-autotrace: see which processes start PyTorch inductor's compile pools, and why.

Install it, then run an unmodified program with ``WP_AUTOTRACE=1``; the
``.pth`` file installed beside the package activates tracing in every
Python process of the run. Nothing here is imported when tracing is off.
"""

__version__ = "0.1.0"
