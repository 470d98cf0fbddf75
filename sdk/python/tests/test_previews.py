"""ws.previews and ws.get_host (E2B's quick start ported: test_e2b_quickstart.py)."""

import contextlib
import socket
import sys

import httpx
import pytest

from berth import NotFoundError, TimeoutError, Workspace
from conftest import free_port, unique


@contextlib.contextmanager
def localhost_names_to_loopback():
    """As browsers do (RFC 6761): every *.localhost name is loopback. This host's resolver
    does not know preview.localhost's subdomains, so the test's HTTP client is told."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".localhost"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo
    try:
        yield
    finally:
        socket.getaddrinfo = real


def test_previews_create_list_revoke_and_get_host(berthd, scratch):
    ws = Workspace.create(name=unique("pv"))
    port = free_port()
    with open(f"{scratch}/index.html", "w") as f:
        f.write("preview works")
    server = ws.commands.run(f"exec {sys.executable} -m http.server {port} --bind 127.0.0.1",
                             background=True, cwd=scratch)
    try:
        host = ws.get_host(port)  # waits for the server to listen
        assert host.startswith(f"{port}-{ws.name}.preview.localhost:")
        private = ws.previews.create(port)
        assert not private.public and private.token and private.link
        assert private.host == host and private.link.startswith(private.url)
        with localhost_names_to_loopback(), httpx.Client(follow_redirects=True,
                                                         trust_env=False) as http:
            page = http.get(private.link)  # the token becomes a cookie, then the page
            assert page.status_code == 200 and page.text == "preview works"
            assert str(page.url) == private.url
            assert ws.previews.revoke(private.id).status == "revoked"
            http.cookies.clear()
            assert http.get(private.link).status_code in (401, 403, 404)
            public = ws.previews.create(port, public=True, expires_in="2h")
            assert public.public and public.token is None
            assert {p.id for p in ws.previews.list()} >= {private.id, public.id}
            page = http.get(public.url, headers={"X-Berth-Skip-Interstitial": "1"})
            assert page.status_code == 200 and page.text == "preview works"
        with pytest.raises(NotFoundError):
            ws.previews.revoke("pv_0000000000000000")
        with pytest.raises(TimeoutError):
            ws.get_host(free_port(), request_timeout=1.5)  # nothing listens there
    finally:
        server.kill()
