"""Who may act on the status page: the operator token and CSRF protection.

* Without ``dgs_web_token`` the page is read-only: every action is refused.
* An operator signs in by posting the token once; the page then sets a
  session cookie ``<nonce>.<mac>`` (HttpOnly, SameSite=Strict), where ``mac``
  is an HMAC of the nonce under the token. The session is held by the server
  (:class:`~.sessions.Sessions`): it ends after ``dgs_web_session_lifetime``,
  at sign-out, when the page restarts, and when the token changes.
* Each action form carries a CSRF value, an HMAC of the session's nonce under
  the token for a different purpose: a page of another site can make the
  browser send the cookie, but cannot read the value. An action needs both,
  and a request whose ``Origin`` names another host is refused as well.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from .sessions import Sessions

#: The session cookie's name.
COOKIE = "dgs_web_session"


class Guard:
    """Checks the session cookie and CSRF values of one configured token;
    the sessions themselves are ``sessions``'."""

    def __init__(self, token: str | None, sessions: Sessions) -> None:
        self._key = token.encode() if token else None
        self.sessions = sessions

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
        nonce = self.sessions.start()
        return f"{nonce}.{self._mac('session', nonce)}"

    def session(self, cookie: str | None) -> str | None:
        """The nonce of a valid cookie of a live session, else ``None``."""
        if self._key is None or not cookie or "." not in cookie:
            return None
        nonce, _, mac = cookie.partition(".")
        if not _same(mac, self._mac("session", nonce)):
            return None
        return nonce if self.sessions.alive(nonce) else None

    def sign_out(self, nonce: str) -> None:
        """End session ``nonce``."""
        self.sessions.end(nonce)

    def csrf(self, nonce: str) -> str:
        """The CSRF value the forms of session ``nonce`` carry."""
        return self._mac("csrf", nonce)

    def authorized(
        self, cookie: str | None, csrf: str | None, origin: str | None, host: str
    ) -> str | None:
        """The session of a request that may act (an action, sign-out): a live
        session, its CSRF value, and no ``Origin`` of another host; else ``None``."""
        nonce = self.session(cookie)
        if nonce is None or not csrf or not _same(csrf, self.csrf(nonce)):
            return None
        return nonce if same_origin(origin, host) else None

    def allows(self, cookie: str | None, csrf: str | None, origin: str | None, host: str) -> bool:
        """Whether an action request may proceed (:meth:`authorized`)."""
        return self.authorized(cookie, csrf, origin, host) is not None


def _same(given: str, expected: str) -> bool:
    """Constant-time equality of a client's value and ours; any text the client
    sends (``compare_digest`` refuses non-ASCII ``str``) is just unequal."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def same_origin(origin: str | None, host: str) -> bool:
    """``Origin`` absent (not a browser's cross-site request) or naming ``host``."""
    if origin is None:
        return True
    return urlsplit(origin).netloc == host
