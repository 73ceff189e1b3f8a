"""Every WP_AUTOTRACE* environment variable, in one home, with the words that turn one on or off.

The one-line ``wp_autotrace.pth`` and ``_site.py`` keep their own literals (they
must import nothing); tests/test_startfile.py checks them equal to these.
Stdlib only, no imports: the host side loads it at start-up.
"""

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")

# Read by every traced process.
ENABLE_ENV = "WP_AUTOTRACE"
LOG_ENV = "WP_AUTOTRACE_LOG"
STACK_ENV = "WP_AUTOTRACE_STACK"
TARGETS_ENV = "WP_AUTOTRACE_TARGETS"
INTERVAL_ENV = "WP_AUTOTRACE_SAMPLE_INTERVAL"
LINGER_ENV = "WP_AUTOTRACE_LINGER"
GUARD_ENV = "WP_AUTOTRACE_GUARD"
REDACT_ENV = "WP_AUTOTRACE_REDACT"
# A job id of the user's choosing, recorded with each process's launcher variables
# (targets.RANK_ENV): runs on several hosts that carry the same one are one job.
JOB_ENV = "WP_AUTOTRACE_JOB"
# `otlp`: the watcher streams the run's spans to the OTEL_EXPORTER_OTLP_* endpoint (watcher/export.py).
EXPORT_ENV = "WP_AUTOTRACE_EXPORT"
# The guard's one mode (GUARD_ENV's value).
GUARD_NESTED_POOLS = "nested-pools"
# Exported by the root for its descendants.
RUN_ENV = "WP_AUTOTRACE_RUN"
ROOT_ENV = "WP_AUTOTRACE_ROOT_PID"
WATCHED_ENV = "WP_AUTOTRACE_WATCHED"  # the run id whose watcher the root started
NOTICE_ENV = "WP_AUTOTRACE_NOTICE"  # the guard's notice file
# Set only when tracing stays off after the settings warnings were printed: the pid that printed
# them, so that its descendants (the same settings) stay silent. Never a run's identity. Not a
# setting: named _MARK, not _ENV, until README's row of the root's internal variables lists it
# (tests/test_readme.py checks every *_ENV name is in README's Settings table).
WARNED_ENV = "WP_AUTOTRACE_WARNED"
# Added by a wrapper to the environment of the interpreters its call's own thread
# starts (never to os.environ; the child pops it at start): how a spawned pool
# process learns which pool it serves.
CHILD_ROLE_ENV = "WP_AUTOTRACE_CHILD_ROLE"
# Every name above starts with this: what a clean child environment drops.
PREFIX = "WP_AUTOTRACE"
# What a run hands down to its descendants (a fresh run, e.g. `wp-autotrace run`, drops them).
RUN_IDENTITY_ENV = (RUN_ENV, ROOT_ENV, NOTICE_ENV, WARNED_ENV)


def is_true(value: "str | None") -> bool:
    """A switch's value read as on (1, true, yes, on; case and spaces ignored)."""
    return (value or "").strip().lower() in TRUE_WORDS


def without_tracer_env(environ: "dict[str, str]") -> "dict[str, str]":
    """A copy of an environment with every WP_AUTOTRACE* variable removed."""
    return {k: v for k, v in environ.items() if not k.startswith(PREFIX)}
