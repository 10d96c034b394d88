"""Passwords out of text: the one masker every message that may quote a
PostgreSQL URI or DSN goes through.

It needs no driver (plain regular expressions), so the command line can mask
any message it prints — a bad flag, a scenario path that was a URI — also
where psycopg is not installed. :mod:`.postgres` uses it for its own messages.
"""

from __future__ import annotations

import re

# a password in a URI's user info (postgresql://user:PASSWORD@host), and as a key=value
_URI_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:/@\s\"'\[]*:)[^@/\s\"']*(@)")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s\"]+)")


def mask_secrets(text: str) -> str:
    """``text`` (a URI, a message quoting one) with every password in it shown
    as ``***``: the one function every PostgreSQL message goes through."""
    return _KV_PASSWORD.sub(r"\1***", _URI_PASSWORD.sub(r"\1***\2", text))
