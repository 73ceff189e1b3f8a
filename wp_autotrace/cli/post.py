"""`export --endpoint`: one POST of OTLP/JSON to an OTLP/HTTP receiver, bounded in every way.

- Never follows a redirect: a 3xx answer to a POST is an error (a login page
  answering 302 is not a receiver that took the spans).
- One total deadline, DEADLINE_S, for connecting, sending and reading the
  answer: a receiver that trickles its answer a byte at a time cannot keep
  the command longer (the request runs in a daemon thread the command stops
  waiting for; every socket operation also times out within the deadline).
- A bounded read of the answer: at most ANSWER_BYTES are read, the rest is
  left unread (an endless answer cannot exhaust memory).
- Credentials in the URL (``http://user:pw@host``) are sent as a Basic
  Authorization header, never printed: every message shows the URL masked as
  the log masks argv (common/redact.py: ``user:***@``, ``?token=***``).

The CLI side only: analysis/export/otlp.py builds the request (``to_otlp``) and
knows nothing of the network.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import IO, Any

from ..common.redact import DEFAULT_PATTERNS, redact_arg

TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for traces
DEADLINE_S = 30.0  # the whole POST, answer included (README: "one POST, 30 s timeout")
ANSWER_BYTES = 1 << 16  # an OTLP answer is a small JSON object (a partial-success count at most)
HTTP_OK = range(200, 300)


class PostError(OSError):
    """The spans were not delivered; the message is for people and holds no credential."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect becomes the HTTPError it answered with: never re-sent elsewhere."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


def shown(url: str) -> str:
    """The URL as messages show it: credentials (user information, secret query values) masked."""
    return redact_arg(url, DEFAULT_PATTERNS)


def traces_url(endpoint: str) -> tuple[str, str | None, str]:
    """(the endpoint with /v1/traces appended when missing and without user information,
    the Authorization header its user information asks for or None, the URL for messages)."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {shown(endpoint)!r}")
    auth = None
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    netloc = parts.netloc.rpartition("@")[2]
    path = parts.path.rstrip("/")
    if not path.endswith(TRACES_PATH):
        path += TRACES_PATH
    url = urllib.parse.urlunsplit((parts.scheme, netloc, path, parts.query, ""))
    return url, auth, shown(urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")))


def post(request: dict[str, Any] | IO[bytes], endpoint: str, deadline: float | None = None) -> str:
    """POST the request (a dict, or a binary file of its JSON, sent from where it stands: a big export is
    never read whole into memory) to the receiver; the URL used (as shown to people).

    Raises PostError (or ValueError for a URL that is not http(s)) with a message in user terms.
    """
    deadline = DEADLINE_S if deadline is None else deadline
    url, auth, told = traces_url(endpoint)
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = auth
    if isinstance(request, dict):
        data: Any = json.dumps(request).encode()
    else:
        data = request
        headers["Content-Length"] = str(os.fstat(request.fileno()).st_size - request.tell())
    req = urllib.request.Request(url, data=data, method="POST", headers=headers)
    outcome: list[BaseException | None] = []
    worker = threading.Thread(target=_send, args=(req, time.monotonic() + deadline, outcome), daemon=True,
                              name="wp-autotrace-post")
    worker.start()
    worker.join(deadline)
    if not outcome:
        raise PostError(f"{told} gave no complete answer within {deadline:g} s")
    if outcome[0] is not None:
        raise PostError(_describe(outcome[0], told))
    return told


def _send(req: urllib.request.Request, end: float, outcome: list[BaseException | None]) -> None:
    """In the worker: send, read a bounded answer; None or the exception, into outcome."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        # The timeout bounds each socket operation; the caller's join bounds the whole.
        with opener.open(req, timeout=max(0.1, end - time.monotonic())) as resp:
            resp.read(ANSWER_BYTES)  # the answer's start only: the rest is left unread
            status = resp.status
        outcome.append(None if status in HTTP_OK else PostError(f"answered HTTP {status}"))
    except BaseException as exc:  # reported by the caller, in its thread
        outcome.append(exc)


def _describe(exc: BaseException, url: str) -> str:
    """One line about a failed POST, naming the masked URL only."""
    if isinstance(exc, urllib.error.HTTPError):
        why = f"{url} answered HTTP {exc.code} {exc.reason}"
        if 300 <= exc.code < 400:
            where = exc.headers.get("Location") if exc.headers else None
            why += (f", a redirect{' to ' + shown(where) if where else ''}: not followed for a POST "
                    "(give the receiver's own URL)")
        return why
    if isinstance(exc, PostError):
        return f"{url} {exc}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot reach {url}: {exc.reason}"
    return f"cannot reach {url}: {exc}"
