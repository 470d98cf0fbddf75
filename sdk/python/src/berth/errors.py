"""Typed errors: one class per berthd error code (docs/api.md, "Conventions"), each with
`.code` (berthd's code), `.status` (the HTTP status, None when no answer came) and
`.retryable` (whether the same call may succeed later unchanged). Transport failures are
wrapped: no httpx exception leaves the SDK."""

from __future__ import annotations

import builtins
from typing import Any, Dict, Optional, Type


class BerthError(Exception):
    """Base of every error the SDK raises."""

    retryable_default = False

    def __init__(self, message: str, *, code: str = "internal", status: Optional[int] = None,
                 details: Optional[Dict[str, Any]] = None, retryable: Optional[bool] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details: Dict[str, Any] = details or {}
        self.retryable = self.retryable_default if retryable is None else retryable

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.code else self.message


class InvalidArgumentError(BerthError):
    """400 invalid_argument (and 405, 413: a request berthd will never take as it is)."""


class AuthError(BerthError):
    """401 unauthenticated: no key, a wrong or revoked key."""


class ForbiddenError(BerthError):
    """403 permission_denied: the key's scope does not allow the call."""


class NotFoundError(BerthError):
    """404 not_found: no such workspace (or another tenant's), file, process or preview."""


class ConflictError(BerthError):
    """409: already_exists, or failed_precondition (the workspace's state forbids it)."""


class AlreadyExistsError(ConflictError):
    """409 already_exists."""


class LockedError(BerthError):
    """423 locked: a person holds the desktop, so the agent's input (and, during a private
    takeover, its screenshots) is refused until they hand back: not retryable as it is (wait
    with desktop.wait_release()). berthd's details say who: `holder` ("human"), `by` (their
    key id), `since`, `lease_expires`, `reason`, `private`."""

    @property
    def holder(self) -> Optional[str]:
        return self._detail("holder")

    @property
    def by(self) -> Optional[str]:
        return self._detail("by")

    @property
    def since(self) -> Optional[str]:
        return self._detail("since")

    @property
    def lease_expires(self) -> Optional[str]:
        return self._detail("lease_expires")

    @property
    def reason(self) -> Optional[str]:
        return self._detail("reason")

    @property
    def private(self) -> bool:
        return self.details.get("private") is True

    def _detail(self, key: str) -> Optional[str]:
        v = self.details.get(key)
        return v if isinstance(v, str) else None


class RateLimitError(BerthError):
    """429 resource_exhausted / too_many_connections: retry later."""

    retryable_default = True


class QuotaExceededError(RateLimitError):
    """429 quota_exceeded: the tenant is over a limit; nothing frees itself (not retryable)."""

    retryable_default = False


class InternalError(BerthError):
    """500, or an answer that is not what docs/api.md says."""


class UnavailableError(BerthError):
    """503 unavailable, or berthd (or the workspace's agent) could not be reached."""

    retryable_default = True


class TimeoutError(BerthError, builtins.TimeoutError):
    """504 deadline_exceeded, or the call's own deadline (`request_timeout`) ran out. Also a
    builtins.TimeoutError, so `except TimeoutError` catches it either way."""

    retryable_default = True


class StorageError(BerthError):
    """507 no_space (the guest's disk is full) or insufficient_storage (the host's)."""


class CommandExitError(BerthError):
    """A command ended with a non-zero exit code (raised unless `check=False`); `.result`
    holds its CommandResult."""

    def __init__(self, result: Any) -> None:
        super().__init__(
            f"command exited with {result.exit_code}"
            + (f" (signal {result.signal})" if result.signal else "")
            + (f": {result.stderr.strip()[-500:]}" if result.stderr.strip() else ""),
            code="command_exit")
        self.result = result
        self.exit_code: int = result.exit_code
        self.stdout: str = result.stdout
        self.stderr: str = result.stderr


class TemplateBuildError(BerthError):
    """A template's build ended "failed" (Templates.wait, Templates.create(wait=True)):
    `.template` is the Template as berthd answered it, `.error` berthd's reason ("the script
    exited with 3"), `.build_log` the end of the build's output; the message has both (the
    log's last lines). Not retryable as it is: fix the script, delete the template, build it
    again."""

    #: How much of the build log's end goes into the message (all of it is on .build_log).
    MESSAGE_LOG_CHARS = 2000

    def __init__(self, template: Any) -> None:
        self.template = template
        self.error: str = template.error or "no reason given"
        self.build_log: str = template.build_log or ""
        message = f"template {template.name!r} failed to build: {self.error}"
        tail = self.build_log.rstrip("\n")
        if tail:
            if len(tail) > self.MESSAGE_LOG_CHARS:
                tail = tail[-self.MESSAGE_LOG_CHARS:]
                tail = "…" + tail[tail.find("\n") + 1:] if "\n" in tail else "…" + tail
            message += "\n--- the end of its build log ---\n" + tail
        super().__init__(message, code="template_build_failed")


_BY_CODE: Dict[str, Type[BerthError]] = {
    "invalid_argument": InvalidArgumentError,
    "method_not_allowed": InvalidArgumentError,
    "too_large": InvalidArgumentError,
    "unauthenticated": AuthError,
    "permission_denied": ForbiddenError,
    "not_found": NotFoundError,
    "already_exists": AlreadyExistsError,
    "failed_precondition": ConflictError,
    "locked": LockedError,
    "resource_exhausted": RateLimitError,
    "too_many_connections": RateLimitError,
    "quota_exceeded": QuotaExceededError,
    "internal": InternalError,
    "unavailable": UnavailableError,
    "deadline_exceeded": TimeoutError,
    "no_space": StorageError,
    "insufficient_storage": StorageError,
}

_BY_STATUS: Dict[int, Type[BerthError]] = {
    400: InvalidArgumentError, 401: AuthError, 403: ForbiddenError, 404: NotFoundError,
    405: InvalidArgumentError, 409: ConflictError, 413: InvalidArgumentError, 423: LockedError,
    429: RateLimitError, 500: InternalError, 502: UnavailableError, 503: UnavailableError,
    504: TimeoutError, 507: StorageError,
}

_CODE_FOR_STATUS = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied",
                    404: "not_found", 409: "failed_precondition", 429: "resource_exhausted",
                    502: "unavailable", 503: "unavailable", 504: "deadline_exceeded"}


def error_from_answer(status: int, body: Any, what: str) -> BerthError:
    """The error for a non-2xx answer: by berthd's code when the body carries one, else by
    the HTTP status."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = err.get("code") if isinstance(err.get("code"), str) else ""
        message = err.get("message") if isinstance(err.get("message"), str) else ""
        details = err.get("details") if isinstance(err.get("details"), dict) else None
        cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or BerthError
        return cls(message or f"{what}: HTTP {status}", code=code or "internal", status=status,
                   details=details)
    cls = _BY_STATUS.get(status, InternalError if status >= 500 else BerthError)
    snippet = body if isinstance(body, str) else ""
    return cls(f"{what}: HTTP {status}{': ' + snippet[:200] if snippet else ''}",
               code=_CODE_FOR_STATUS.get(status, "internal"), status=status)
