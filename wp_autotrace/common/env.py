"""Every WP_AUTOTRACE* environment variable, in one home, with the words that turn one on or off; and
the other variables a traced process records (POOL_ENV, RANK_ENV), read without a KeyError per unset name.

The one-line ``wp_autotrace.pth`` and ``_site.py`` keep their own literals (they
must import nothing); tests/test_startfile.py checks them equal to these.
Stdlib only: the host side loads it at start-up.
"""

import os

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
# (RANK_ENV, below): runs on several hosts that carry the same one are one job.
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


# Environment variables recorded at process start and at each warm_pool call,
# because each one silently decides whether a pool starts.
POOL_ENV = (
    "TORCH_WARM_POOL",
    "TORCHINDUCTOR_COMPILE_THREADS",
    "TORCHINDUCTOR_WORKER_START",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    "TORCH_TNT_IN_USE",
    # Set by pytest during each test: the test that made a pool (at SubprocPool.__init__).
    "PYTEST_CURRENT_TEST",
)

# Rank and launcher variables recorded at process start (torchrun/elastic, Slurm,
# Open MPI, MPICH/Intel MPI, PMIx): which rank a process serves, and under which
# launch. The launch identities (analysis/derive/jobs.py groups runs of several hosts
# into one job by them) are a few more reads of os.environ per process start.
RANK_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "GROUP_RANK",
    "LOCAL_WORLD_SIZE",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "TORCHELASTIC_RUN_ID",
    # launch identities
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_NODEID",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_JOBID",
    JOB_ENV,
)


def set_vars(names: "tuple[str, ...]") -> "dict[str, str]":
    """{name: value} of the names set in os.environ now, in names' order.

    Read from os.environ's own dict of encoded names where os.environ is the standard mapping:
    ``name in os.environ`` raises and catches a KeyError inside for each name that is not set (about
    0.7 µs each, and most of these are unset); a dict lookup does not. Another mapping (a host may
    replace os.environ) is read through its own interface.
    """
    env = os.environ
    data = getattr(env, "_data", None)
    if type(env) is _ENVIRON and type(data) is dict:
        keys = _encoded.get(names)
        if keys is None:
            keys = _encoded[names] = tuple((k, env.encodekey(k)) for k in names)
        decode = env.decodevalue
        return {k: decode(v) for k, key in keys if (v := data.get(key)) is not None}
    return {k: env[k] for k in names if k in env}


_ENVIRON = type(os.environ)
_encoded: "dict[tuple[str, ...], tuple[tuple[str, object], ...]]" = {}  # names -> (name, os.environ's key)


def pool_env() -> "dict[str, str]":
    """The environment variables that decide whether a pool starts, as set now."""
    return set_vars(POOL_ENV)


# Set by hand in many shells and containers: on their own they prove no launch.
_ONLY_WITH_OTHERS = ("MASTER_ADDR", "MASTER_PORT")


def rank_env() -> "dict[str, str]":
    """The rank/launcher variables that are set (empty outside a distributed launch)."""
    found = set_vars(RANK_ENV)
    return found if set(found) - set(_ONLY_WITH_OTHERS) else {}
