"""What the two drivers share: httpx requests from the core's Request, exceptions from
httpx's, and the bookkeeping of open streams."""

from __future__ import annotations

import socket
from typing import Any, Dict

import httpx

from ._core import CHUNK, Config, Request, Timeouts
from .errors import BerthError, TimeoutError, UnavailableError

USER_AGENT = "berth-python/0.1.0"
#: At most this much of an error answer's body is read (the JSON error is far smaller).
ERROR_BODY_LIMIT = 64 * 1024


def client_args(config: Config) -> Dict[str, Any]:
    return {
        "base_url": config.url,
        "headers": {"Authorization": f"Bearer {config.api_key}", "User-Agent": USER_AGENT},
        # Proxies from the environment would see the API key; berthd is addressed directly.
        "trust_env": False,
        "timeout": httpx.Timeout(config.request_timeout, connect=10.0),
    }


def httpx_timeout(t: Timeouts) -> httpx.Timeout:
    return httpx.Timeout(connect=t.connect, read=t.read, write=t.write, pool=t.connect)


def build(client: Any, req: Request, t: Timeouts, content: Any) -> httpx.Request:
    kwargs: Dict[str, Any] = {"params": req.params or None, "headers": req.headers or None,
                              "timeout": httpx_timeout(t)}
    if req.json is not None:
        kwargs["json"] = req.json
    elif content is not None:
        kwargs["content"] = content
    return client.build_request(req.method, req.path, **kwargs)  # type: ignore[no-any-return]


def wrap(e: BaseException, what: str) -> BerthError:
    """An httpx exception as the SDK's error: timeouts TimeoutError, connection trouble
    UnavailableError, anything else BerthError. `status` stays None: no answer came."""
    if isinstance(e, httpx.TimeoutException):
        return TimeoutError(f"{what}: timed out ({type(e).__name__})", code="deadline_exceeded")
    if isinstance(e, (httpx.TransportError, httpx.StreamError)):
        return UnavailableError(f"{what}: {type(e).__name__}: {e}", code="unavailable")
    return BerthError(f"{what}: {type(e).__name__}: {e}", code="internal")


def cut_stream(response: Any) -> None:
    """Shuts down the socket under a streamed answer, so that a read blocked on it (in another
    thread or task) fails at once; closing alone would not wake it."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
            return
        except OSError:
            pass


def set_nodelay(response: Any) -> None:
    """TCP_NODELAY on the connection under `response`, for the requests that reuse it: httpcore
    sends a request's headers and its body in two writes, and under Nagle's algorithm the body
    then waits for the server's ACK of the headers, which Linux delays by 40 ms on a kept-alive
    connection (measured: an exec of `true` took 54 ms instead of 5). httpx 0.23 (Debian 12's)
    has no socket options at connect time, hence after the first answer. asyncio sets it on
    its own sockets."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


# The exceptions a driver turns into BerthError (httpx's, and a closed client's RuntimeError).
WRAPPED = (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, RuntimeError)
__all__ = ["CHUNK", "USER_AGENT", "ERROR_BODY_LIMIT", "client_args", "build", "wrap", "WRAPPED",
           "cut_stream", "set_nodelay"]
