"""The ``wp-autotrace`` command: report, run, watch, cleanup, export, doctor."""
