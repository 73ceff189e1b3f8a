"""Secrets out of the log: argv option values and environment values whose names look secret.

Imported on the start-up path (every traced interpreter), so it uses no
re/fnmatch/typing: a tiny glob matcher (``*`` and ``?``, case-insensitive)
is enough for name patterns. See docs/security.md for what is and is not
covered.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from collections.abc import Mapping

# Names (option names without their leading dashes, environment variable
# names) matching any of these have their values replaced by MASK.
DEFAULT_PATTERNS = ("*token*", "*password*", "*secret*", "*key*", "*credential*")
MASK = "***"
# Values of secret environment variables shorter than this are not searched
# for inside argv: "1" or "yes" would mask unrelated text everywhere.
MIN_ENV_SECRET = 6


def glob_match(pattern: str, name: str) -> bool:
    """fnmatch-style match of a lower-case pattern (``*``, ``?``) against name, ignoring case."""
    name = name.lower()
    p = n = 0
    star_p, star_n = -1, 0
    while n < len(name):
        if p < len(pattern) and (pattern[p] == "?" or pattern[p] == name[n]):
            p, n = p + 1, n + 1
        elif p < len(pattern) and pattern[p] == "*":
            star_p, star_n = p, n
            p += 1
        elif star_p >= 0:  # backtrack: let the last * take one more character
            p, star_n = star_p + 1, star_n + 1
            n = star_n
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def parse_patterns(spec: str) -> tuple[str, ...]:
    """DEFAULT_PATTERNS plus the comma-separated patterns of WP_AUTOTRACE_REDACT."""
    extra = tuple(item.strip().lower() for item in spec.split(",") if item.strip())
    return DEFAULT_PATTERNS + extra


# pattern -> its inner word when it is ``*word*`` (a plain substring test does:
# the common, fast case), else "" (glob_match). Filled once per pattern.
_substring: dict[str, str] = {}


def _word(pattern: str) -> str:
    word = _substring.get(pattern)
    if word is None:
        inner = pattern[1:-1]
        plain = len(pattern) > 2 and pattern[0] == pattern[-1] == "*" and "*" not in inner and "?" not in inner
        word = _substring[pattern] = inner if plain else ""
    return word


def is_secret(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether an option or variable name looks secret."""
    lower = name.lower()
    for p in patterns:
        word = _word(p)
        if word in lower if word else glob_match(p, lower):
            return True
    return False


def _option_name(arg: str) -> str:
    """``--api-key`` -> ``api-key``; an argument that is not an option -> ''."""
    return arg.lstrip("-") if arg.startswith("-") else ""


def redact_argv(argv: list[str], patterns: tuple[str, ...], env_secrets: tuple[str, ...] = ()) -> list[str]:
    """argv with secret option values masked.

    ``--opt=value`` and ``NAME=value`` keep the name; ``--opt value`` masks
    the next argument unless it is itself an option. Any argument holding the
    value of a secret environment variable has that value masked.
    """
    out: list[str] = []
    mask_next = False
    for arg in argv:
        arg = str(arg)
        if mask_next and not arg.startswith("-"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        name, eq, _ = arg.partition("=")
        bare = name.lstrip("-")
        if eq and bare and " " not in bare and is_secret(bare, patterns):
            out.append(name + "=" + MASK)
            continue
        option = _option_name(arg)
        if option and not eq and is_secret(option, patterns):
            mask_next = True
        for value in env_secrets:
            if value in arg:
                arg = arg.replace(value, MASK)
        out.append(arg)
    return out


def redact_env(env: dict[str, str], patterns: tuple[str, ...]) -> dict[str, str]:
    """A copy of env with the values of secret-looking names masked."""
    return {k: (MASK if is_secret(k, patterns) else v) for k, v in env.items()}


def env_secrets(environ: Mapping[str, str], patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Values of secret-looking environment variables, long enough to search argv for."""
    return tuple(v for k, v in environ.items() if len(v) >= MIN_ENV_SECRET and is_secret(k, patterns))


def redact_cmd(cmd: str, patterns: tuple[str, ...] = DEFAULT_PATTERNS, env_secrets: tuple[str, ...] = ()) -> str:
    """A space-joined command line (as the process-tree records hold it) with secrets masked."""
    return " ".join(redact_argv(cmd.split(" "), patterns, env_secrets))
