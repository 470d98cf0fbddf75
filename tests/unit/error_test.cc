#include <cerrno>

#include <catch2/catch.hpp>

#include "common/error.h"

using namespace berth;

TEST_CASE("every error code has a distinct wire name that round-trips") {
  for (auto code : {ErrorCode::kInvalidArgument, ErrorCode::kUnauthenticated,
                    ErrorCode::kPermissionDenied, ErrorCode::kNotFound,
                    ErrorCode::kMethodNotAllowed, ErrorCode::kAlreadyExists,
                    ErrorCode::kFailedPrecondition, ErrorCode::kTooLarge,
                    ErrorCode::kResourceExhausted, ErrorCode::kInternal, ErrorCode::kUnavailable,
                    ErrorCode::kDeadlineExceeded, ErrorCode::kNoSpace,
                    ErrorCode::kQuotaExceeded, ErrorCode::kInsufficientStorage,
                    ErrorCode::kLocked}) {
    auto name = ErrorCodeName(code);
    REQUIRE(ErrorCodeFromName(name) == code);
  }
  REQUIRE_FALSE(ErrorCodeFromName("no_such_code").has_value());
}

TEST_CASE("error codes map to the HTTP statuses clients rely on") {
  CHECK(HttpStatus(ErrorCode::kInvalidArgument) == 400);
  CHECK(HttpStatus(ErrorCode::kUnauthenticated) == 401);
  CHECK(HttpStatus(ErrorCode::kPermissionDenied) == 403);
  CHECK(HttpStatus(ErrorCode::kNotFound) == 404);
  CHECK(HttpStatus(ErrorCode::kAlreadyExists) == 409);
  CHECK(HttpStatus(ErrorCode::kFailedPrecondition) == 409);
  CHECK(HttpStatus(ErrorCode::kTooLarge) == 413);
  CHECK(HttpStatus(ErrorCode::kResourceExhausted) == 429);
  CHECK(HttpStatus(ErrorCode::kUnavailable) == 503);
  CHECK(HttpStatus(ErrorCode::kNoSpace) == 507);
  CHECK(HttpStatus(ErrorCode::kQuotaExceeded) == 429);
  CHECK(HttpStatus(ErrorCode::kInsufficientStorage) == 507);
  CHECK(HttpStatus(ErrorCode::kLocked) == 423);
  // A bare status from a peer keeps reading as the older codes.
  CHECK(ErrorCodeForHttpStatus(429) == ErrorCode::kResourceExhausted);
  CHECK(ErrorCodeForHttpStatus(507) == ErrorCode::kNoSpace);
  CHECK(ErrorCodeForHttpStatus(404) == ErrorCode::kNotFound);
  CHECK(ErrorCodeForHttpStatus(502) == ErrorCode::kInternal);
}

TEST_CASE("errno maps to the statuses the files API promises") {
  CHECK(ErrnoError(ENOENT, "open x").code == ErrorCode::kNotFound);
  CHECK(ErrnoError(EACCES, "open x").code == ErrorCode::kPermissionDenied);
  CHECK(ErrnoError(EEXIST, "mkdir x").code == ErrorCode::kAlreadyExists);
  CHECK(ErrnoError(ENOSPC, "write x").code == ErrorCode::kNoSpace);
  CHECK(ErrnoError(ENAMETOOLONG, "open x").code == ErrorCode::kInvalidArgument);
  CHECK(ErrnoError(ENOENT, "open /x").message.find("open /x") == 0);
}
