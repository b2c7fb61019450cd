"""Who may act on the status page: the operator token and CSRF protection.

* Without ``dgs_web_token`` the page is read-only: every action is refused.
* An operator signs in by posting the token once; the page then sets a
  session cookie ``<nonce>.<mac>`` (HttpOnly, SameSite=Strict), where ``mac``
  is an HMAC of the nonce under the token. Changing the token ends every session.
* Each action form carries a CSRF value, an HMAC of the session's nonce under
  the token for a different purpose: a page of another site can make the
  browser send the cookie, but cannot read the value. An action needs both,
  and a request whose ``Origin`` names another host is refused as well.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

#: The session cookie's name.
COOKIE = "dgs_web_session"


class Guard:
    """Checks the session cookie and CSRF values of one configured token."""

    def __init__(self, token: str | None) -> None:
        self._key = token.encode() if token else None

    @property
    def enabled(self) -> bool:
        """Whether actions are possible at all (a token is configured)."""
        return self._key is not None

    def _mac(self, purpose: str, nonce: str) -> str:
        assert self._key is not None
        return hmac.new(self._key, f"{purpose}:{nonce}".encode(), hashlib.sha256).hexdigest()

    def sign_in(self, given: str) -> str | None:
        """A new session cookie value if ``given`` is the token, else ``None``."""
        if self._key is None or not hmac.compare_digest(given.encode(), self._key):
            return None
        nonce = secrets.token_hex(16)
        return f"{nonce}.{self._mac('session', nonce)}"

    def session(self, cookie: str | None) -> str | None:
        """The nonce of a valid session cookie, else ``None``."""
        if self._key is None or not cookie or "." not in cookie:
            return None
        nonce, _, mac = cookie.partition(".")
        return nonce if _same(mac, self._mac("session", nonce)) else None

    def csrf(self, nonce: str) -> str:
        """The CSRF value the forms of session ``nonce`` carry."""
        return self._mac("csrf", nonce)

    def allows(self, cookie: str | None, csrf: str | None, origin: str | None, host: str) -> bool:
        """Whether an action request may proceed: a valid session, its CSRF
        value, and no ``Origin`` of another host."""
        nonce = self.session(cookie)
        if nonce is None or not csrf or not _same(csrf, self.csrf(nonce)):
            return False
        return same_origin(origin, host)


def _same(given: str, expected: str) -> bool:
    """Constant-time equality of a client's value and ours; any text the client
    sends (``compare_digest`` refuses non-ASCII ``str``) is just unequal."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def same_origin(origin: str | None, host: str) -> bool:
    """``Origin`` absent (not a browser's cross-site request) or naming ``host``."""
    if origin is None:
        return True
    return urlsplit(origin).netloc == host


#: Host names a page bound to a loopback address answers to.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def loopback_bind(host: str) -> bool:
    """Whether the page is bound to this machine only (127.0.0.0/8, ::1, localhost)."""
    return host in LOOPBACK_NAMES or host.startswith("127.")


def host_allowed(header: str | None) -> bool:
    """Whether a request's ``Host`` names this machine (checked when the page
    is bound to a loopback address): a page on 127.0.0.1 read through another
    name is a DNS-rebinding attempt by some web site in the operator's browser."""
    if not header:
        return False
    try:
        name = urlsplit(f"//{header}").hostname
    except ValueError:
        return False
    return name is not None and loopback_bind(name)
