"""The largest request body the page reads.

The page's only bodies are its small forms (the token, an action), so a
request announcing more than :data:`MAX_BODY_BYTES` gets 413 before any of
its body is read, and one sent in chunks without a length gets 413 as soon as
it has sent more. The connection is closed after a 413.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import PlainTextResponse

#: The most bytes of body a request may have (the sign-in and action forms
#: take a few hundred).
MAX_BODY_BYTES = 16 * 1024


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is refused with 413;
    a smaller one is read whole and handed to the app."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = None
        for key, value in scope.get("headers") or []:
            if key == b"content-length":
                length = bytes(value).strip()
        if length is not None and (
            not length.isdigit() or len(length) > 12 or int(length) > self.limit
        ):
            await self.too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self.too_large(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def too_large(self, scope: Any, receive: Any, send: Any) -> None:
        response = PlainTextResponse(
            f"request body too large: this page reads at most {self.limit} bytes\n",
            status_code=413,
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives ``body`` once, then waits on the real one (a
    disconnect)."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
