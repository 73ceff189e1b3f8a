"""Secrets out of the log: argv option values and environment values whose names look secret.

Masking is per argument, always: a command line is masked as its list of
arguments (``redact_argv``) and joined only afterwards, never joined and
re-split (``--token=two words`` is one argument: all of its value goes).
Within one argument: ``--opt=value`` / ``NAME=value`` with a secret-looking
name, the password of a URL's user information (``postgres://u:***@host``),
an ``Authorization:`` header's credentials (``Authorization: Bearer ***``),
a ``Secret-Name: value`` header, a ``Bearer`` token, and the value of any
secret environment variable of the process (or, for the watcher, of the
child: ``procfs.environ_secrets``).

Imported on the start-up path (every traced interpreter), so it uses no
re/fnmatch/typing: a tiny glob matcher (``*`` and ``?``, case-insensitive)
is enough for name patterns. See docs/security.md for what is and is not
covered.
"""

import os

from .env import FS_ENCODING

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# Names (option names without their leading dashes, environment variable
# names) matching any of these have their values replaced by MASK.
DEFAULT_PATTERNS = ("*token*", "*password*", "*passwd*", "pass", "*passphrase*", "*secret*", "*key*",
                    "*credential*")
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
        if p < len(pattern) and pattern[p] == "*":  # first: a "*" in the pattern is a wildcard even
            star_p, star_n = p, n                   # where the name holds a "*" too
            p += 1
        elif p < len(pattern) and (pattern[p] == "?" or pattern[p] == name[n]):
            p, n = p + 1, n + 1
        elif star_p >= 0:  # backtrack: let the last * take one more character
            p, star_n = star_p + 1, star_n + 1
            n = star_n
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def parse_patterns(spec: str) -> "tuple[str, ...]":
    """DEFAULT_PATTERNS plus the comma-separated patterns of WP_AUTOTRACE_REDACT."""
    if not spec:  # the common case: every traced start reads the variable, most have none
        return DEFAULT_PATTERNS
    extra = []
    for item in spec.split(","):  # loops, not comprehensions, in this module: each is a code object every start loads
        item = item.strip().lower()
        if item:
            extra.append(item)
    return DEFAULT_PATTERNS + tuple(extra)


# patterns -> (the inner words of its ``*word*`` patterns: a plain substring test does, the common, fast case; its
# patterns without a wildcard; the others, glob_match's), made once per pattern tuple (a run has one or two): a name
# then costs one lower() and C-level tests, and a traced start-up looks at every environment variable's name
# (argv_env_secrets; docs/scale.md, "Traced call and start-up").
_compiled: "dict[tuple[str, ...], tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]]" = {}
_MAX_COMPILED = 64  # pattern tuples kept compiled: a bound for callers that make many


def _compile(patterns: "tuple[str, ...]") -> "tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]":
    words: list[str] = []
    wild: list[str] = []
    whole: list[str] = []
    for p in patterns:  # one pass, no call a pattern (a traced start-up compiles the defaults once)
        inner = p[1:-1]
        if len(p) > 2 and p[0] == p[-1] == "*" and "*" not in inner and "?" not in inner:
            words.append(inner)
        else:
            (wild if "*" in p or "?" in p else whole).append(p)
    if len(_compiled) >= _MAX_COMPILED:
        _compiled.clear()
    compiled = _compiled[patterns] = (tuple(words), frozenset(whole), tuple(wild))
    return compiled


def is_secret(name: str, patterns: "tuple[str, ...]") -> bool:
    """Whether an option or variable name looks secret: it matches one of patterns (glob_match)."""
    patterns = tuple(patterns)
    words, whole, wild = _compiled.get(patterns) or _compile(patterns)
    lower = name.lower()
    if lower in whole:  # a pattern without a wildcard matches only itself
        return True
    for word in words:
        if word in lower:
            return True
    return any(map(glob_match, wild, (lower,) * len(wild)))  # map: a generator is one code object more to load


def _option_name(arg: str) -> str:
    """``--api-key`` -> ``api-key``; an argument that is not an option -> ''."""
    return arg.lstrip("-") if arg.startswith("-") else ""


# Header names whose whole value is a credential (RFC 9110 11.6.2, 11.7.2).
AUTH_HEADERS = ("authorization:", "proxy-authorization:")
# A token after one of these words (an auth scheme) is a credential wherever it appears.
BEARER = "bearer "
# Characters that end a token inside a longer argument (a shell command, a quoted header).
_TOKEN_END = " \t\n'\"`;,)"
# What ends a URL's authority (RFC 3986 3.2): the path, query or fragment, or the token's end.
_AUTHORITY_END = "/?#" + _TOKEN_END


def _token_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] not in _TOKEN_END:
        end += 1
    return end


def _mask_url_passwords(arg: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://user:***@host``, every URL in arg."""
    i = 0
    while True:
        j = arg.find("://", i)
        if j < 0:
            return arg
        start = end = j + 3
        while end < len(arg) and arg[end] not in _AUTHORITY_END:
            end += 1
        at = arg.rfind("@", start, end)
        colon = arg.find(":", start, at) if at > 0 else -1
        if colon >= 0 and arg[colon + 1:at] != MASK:
            arg = arg[:colon + 1] + MASK + arg[at:]
            end = colon + 1 + len(MASK) + (end - at)
        i = end


def _mask_auth(arg: str, patterns: "tuple[str, ...]") -> str:
    """Authorization headers (the scheme kept), ``Secret-Name: value`` headers, Bearer tokens."""
    lower = arg.lower()
    for header in AUTH_HEADERS:
        i = lower.find(header)
        if i >= 0:
            start = i + len(header)
            while start < len(arg) and arg[start] == " ":
                start += 1
            end = _token_end(arg, start)
            if arg[end:end + 1] == " " and end > start:  # "Bearer xyz": the scheme kept, its token masked
                start = end + 1
                end = _token_end(arg, start)
            if end > start and arg[start:end] != MASK:
                arg = arg[:start] + MASK + arg[end:]
            return arg
    name, colon, value = arg.partition(":")
    if colon and value.startswith(" ") and name and " " not in name.strip("-") and is_secret(name, patterns):
        return name + ": " + MASK
    i = lower.find(BEARER)
    while i >= 0:
        start = i + len(BEARER)
        end = _token_end(arg, start)
        if end > start and arg[start:end] != MASK:
            arg = arg[:start] + MASK + arg[end:]
            lower = arg.lower()
        i = lower.find(BEARER, start + 1)
    return arg


# What may open a word of program text around a value ("--token", f(token=..., ['--key'...).
_WORD_OPEN = "\"'`([{"
# What may close it (a quote, a call's parenthesis, a list's bracket, the separators).
_WORD_CLOSE = "\"'`;,)]}"
_SPACE = " \t\n"
# redact_arg's test for program or shell text in an argument: one C pass over it, where a generator over these
# characters was a Python step each (every argument of every process_start passes here).
_TEXT_CHARS = frozenset(_SPACE + _WORD_OPEN)
# What may open a value inside a word.
_WORD_INNER = _WORD_OPEN + ",;?&"


def _plain_name(name: str) -> bool:
    """An option or variable name (letters, digits, _ . -): not a piece of program text."""
    rest = name.replace("_", "").replace(".", "").replace("-", "")  # str.isalnum: every character's isalnum()
    return bool(name) and (not rest or rest.isalnum())


def redact_arg(arg: str, patterns: "tuple[str, ...]", env_secrets: "tuple[str, ...]" = (), _inner: bool = False) -> str:
    """One argument with its secrets masked (everything but the ``--opt value`` pairing)."""
    if "://" in arg:  # first: a URL's query may hold a secret-looking name= too
        arg = _mask_url_passwords(arg)
    name, eq, value = arg.partition("=")
    bare = name.lstrip("-")
    if eq and _plain_name(bare) and is_secret(bare, patterns):
        # In program text the value's opening quote is the text's, not the secret's: kept.
        lead = len(value) - len(value.lstrip(_WORD_OPEN)) if _inner else 0
        return name + "=" + value[:lead] + MASK
    if ":" in arg or " " in arg:
        arg = _mask_auth(arg, patterns)
    if not _inner and (eq or not _TEXT_CHARS.isdisjoint(arg)):
        # A shell command or a program's text in one argument (sh -c "train --token abc",
        # python -c '... "--password", "pw" ...'), a URL's query (?token=x): its words are
        # arguments too.
        arg = _redact_words(arg, patterns)
    for value in env_secrets:
        if value in arg:
            arg = arg.replace(value, MASK)
    return arg


def _redact_words(text: str, patterns: "tuple[str, ...]") -> str:
    """Program or shell text with each word's secret values masked and nothing else changed: a word's
    quotes, brackets and separators are kept around its masked value, and the whitespace between
    words is kept as it was."""
    out: list[str] = []
    mask_next = False
    i, n = 0, len(text)
    while i < n:
        j = i
        while j < n and text[j] not in _SPACE:
            j += 1
        word = text[i:j]
        k = j
        while k < n and text[k] in _SPACE:
            k += 1
        start = len(word) - len(word.lstrip(_WORD_OPEN))
        end = len(word.rstrip(_WORD_CLOSE))
        # Inside a word, a value may follow an opener too: print("--password=x"), f(token=x),
        # a URL's ?token=x&key=y (one pair masked per word: its value runs to the word's end).
        eq = word.find("=", start, end)
        lo, stop = start, eq if eq >= 0 else end
        for c in _WORD_INNER:
            at = word.rfind(c, lo, stop) + 1
            if at > start:
                start = at
        core = word[start:end] if end > start else ""
        if core:
            if mask_next and not core.startswith("-"):
                core = MASK
                mask_next = False
            else:
                option = _option_name(core)
                mask_next = bool(option) and "=" not in core and _plain_name(option) and is_secret(option, patterns)
                core = redact_arg(core, patterns, (), _inner=True)
            word = word[:start] + core + word[max(end, start):]
        out.append(word + text[j:k])
        i = k
    return "".join(out)


def redact_argv(argv: "list[str]", patterns: "tuple[str, ...]", env_secrets: "tuple[str, ...]" = (),
                _inner: bool = False) -> "list[str]":
    """argv with secrets masked, argument by argument.

    ``--opt=value`` and ``NAME=value`` keep the name; ``--opt value`` masks
    the next argument unless it is itself an option; then each argument as
    ``redact_arg`` says.
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
        option = _option_name(arg)
        if option and "=" not in arg and is_secret(option, patterns):
            mask_next = True
        out.append(redact_arg(arg, patterns, env_secrets, _inner))
    return out


def redact_env(env: "dict[str, str]", patterns: "tuple[str, ...]") -> "dict[str, str]":
    """A copy of env with the values of secret-looking names masked."""
    masked = {}
    for k, v in env.items():
        masked[k] = MASK if is_secret(k, patterns) else v
    return masked


def env_secrets(environ: "Mapping[str, str]", patterns: "tuple[str, ...]") -> "tuple[str, ...]":
    """Values of secret-looking environment variables, long enough to search argv for (in environ's order).

    Names first: a value is read only for a secret name (os.environ's items() decodes every value)."""
    found = []
    for name in environ:
        if is_secret(name, patterns):
            value = environ[name]
            if len(value) >= MIN_ENV_SECRET:
                found.append(value)
    return tuple(found)


def argv_env_secrets(argv: "list[str]", patterns: "tuple[str, ...]") -> "tuple[str, ...]":
    """What redact_argv(argv, patterns, env_secrets(os.environ, patterns)) needs of os.environ, for a
    fraction of the cost (a process start masks its own argv with it): the values of secret names,
    leaving out each value that cannot change the masking, one found in no argument and holding no
    ``*`` (a mask written before it could make one).

    Names first, all at once: every name decoded as os.environ's decodekey decodes one (no name holds a NUL)
    and lowered in one string, in which each pattern's word (or whole name) is found by C searches; only the
    few names found are looked at one by one. A start then pays per environment variable only those C passes:
    the names most processes carry are none secret (is_secret on each name cost ~1.7K instructions a variable).
    A pattern with another wildcard (glob_match) has every name tested as is_secret tests it."""
    env = os.environ
    data = getattr(env, "_data", None)
    try:
        if type(env) is not _ENVIRON or type(data) is not dict:
            raise TypeError
        text = "\0".join(argv)
    except TypeError:
        return env_secrets(env, patterns)
    patterns = tuple(patterns)
    words, whole, wild = _compiled.get(patterns) or _compile(patterns)
    keys = list(data)
    if wild:
        named: Iterable[int] = range(len(keys))
    else:
        # "\0" around each name: a word never spans two names, a whole name is "\0name\0"; a hit's index is the
        # count of NULs before it (str.lower maps a name alone as within the joined text: NUL is not cased).
        low = "\0" + b"\0".join(keys).decode(FS_ENCODING, "surrogateescape").lower() + "\0"
        hits = set()
        for needle in (*words, *map("\0{}\0".format, whole)):
            at, index, counted = low.find(needle), -1, 0  # NULs counted up to `counted`: each hit counts on from there
            while at >= 0:
                index += low.count("\0", counted, at + 1)
                counted = at + 1
                hits.add(index)
                at = low.find(needle, counted)
        named = sorted(hits)  # os.environ's own order, as env_secrets reads it
    found = []
    for i in named:
        raw = data[keys[i]]
        if len(raw) >= MIN_ENV_SECRET:
            value = raw.decode(FS_ENCODING, "surrogateescape")  # os.environ's decodevalue, without its Python call
            if len(value) >= MIN_ENV_SECRET and (value in text or "*" in value) and (
                    not wild or is_secret(env.decodekey(keys[i]), patterns)):
                found.append(value)
    return tuple(found)


_ENVIRON = type(os.environ)
