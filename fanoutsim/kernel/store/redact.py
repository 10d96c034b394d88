"""Passwords out of text: the one masker every message that may quote a
PostgreSQL URI or DSN goes through.

It needs no driver (plain regular expressions), so the command line can mask
any message it prints — a bad flag, a scenario path that was a URI — also
where psycopg is not installed. :mod:`.postgres` uses it for its own messages.

Two nets: patterns (a URI's user info, any ``password=``), and the odd
passwords the command line was given (:func:`remember_secrets`), masked
wherever they show — a driver's message may quote one alone ("unexpected
spaces found in ...") where no pattern can tell it is one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

# a password in a URI's user info (postgresql://user:PASSWORD@host: up to the token's
# last @, so a / or an @ inside it is masked too), and as a key=value
_URI_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:/@\s\"'\[]*:)[^\s\"']*(@)", re.IGNORECASE)
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s\"'&]+)", re.IGNORECASE)
_URI = re.compile(r"postgres(?:ql)?://", re.IGNORECASE)
_SHORTEST = 3  # a remembered password shorter than this is left to the patterns: masking every "ab" garbles

_known: set[str] = set()


def mask_secrets(text: str) -> str:
    """``text`` (a URI, a message quoting one) with every password in it shown
    as ``***``: the one function every PostgreSQL message goes through."""
    text = _KV_PASSWORD.sub(r"\1***", _URI_PASSWORD.sub(r"\1***\2", text))
    for secret in sorted(_known, key=len, reverse=True):  # a longer one first: it may hold a shorter
        text = text.replace(secret, "***")
    return text


def passwords_in(word: str) -> list[str]:
    """The passwords ``word`` (one command-line argument) carries: a URI's
    (everything between the user's ``:`` and the last ``@``), a ``password=``
    value's; each as typed and percent-decoded."""
    found = [m.group(2).strip("'") for m in _KV_PASSWORD.finditer(word)]
    uri = _URI.match(word)
    if uri:
        userinfo, at, _ = word[uri.end() :].rpartition("@")
        if at and ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    # each as typed and decoded, and each piece around an @ (a driver may split it there)
    whole = {s for p in found for s in (p, unquote(p))}
    return [s for s in whole | {piece for s in whole for piece in s.split("@")} if s and s != "***"]


# a character a URI pattern may stop at, or that makes a driver quote the password alone
_ODD = re.compile(r"[^A-Za-z0-9._~-]")


def remember_secrets(words: Iterable[str]) -> None:
    """Mask, from now on, every odd password ``words`` (the command line)
    carries: one with a character the patterns or a driver's message may split
    it at (a space, a /, a %, an @). A plain one is left to the patterns, which
    find it in any URI or DSN: remembered, a password such as "postgres" would
    mask every "postgres" a message says."""
    for word in words:
        found = passwords_in(str(word))
        odd = [p for p in found if _ODD.search(p)]  # each remembered: one of these, or a piece of one
        _known.update(s for s in found if len(s) >= _SHORTEST and any(s in p for p in odd))
