"""The WSGI environ the asyncio worker's bridge builds: what the app reads must be what was sent."""

from __future__ import annotations

from werkzeug.wrappers import Request

from consumer.http.environ import wsgi_environ


def scope(*headers: tuple[bytes, bytes]) -> dict[str, object]:
    return {"type": "http", "method": "POST", "path": "/push", "headers": list(headers)}


def test_a_chunked_body_reaches_the_app_whole() -> None:
    """The bridge has already read and de-chunked the body: a ``Transfer-Encoding: chunked``
    passed on would make Werkzeug treat it as a stream of unknown length and read nothing."""
    environ = wsgi_environ(scope((b"transfer-encoding", b"chunked")), b'{"message": {}}')
    assert Request(environ).get_data() == b'{"message": {}}'
    assert "HTTP_TRANSFER_ENCODING" not in environ


def test_the_length_is_the_bodys_not_the_declared_one() -> None:
    environ = wsgi_environ(scope((b"content-length", b"999")), b"abc")
    assert environ["CONTENT_LENGTH"] == "3" and Request(environ).get_data() == b"abc"
