#include "controller/workspace/workspace.h"

#include <fmt/format.h>

#include <array>

namespace berth::workspace {
namespace {

constexpr std::array<std::pair<State, std::string_view>, 9> kStates = {{
    {State::kCreating, "creating"},
    {State::kStarting, "starting"},
    {State::kRunning, "running"},
    {State::kStopping, "stopping"},
    {State::kStopped, "stopped"},
    {State::kHibernating, "hibernating"},
    {State::kHibernated, "hibernated"},
    {State::kDeleting, "deleting"},
    {State::kError, "error"},
}};

constexpr std::array<Size, 3> kSizes = {{
    {"small", 1, 1024},
    {"medium", 2, 2048},
    {"large", 2, 4096},
}};

}  // namespace

std::string_view StateName(State state) {
  for (const auto& [s, name] : kStates) {
    if (s == state) return name;
  }
  return "error";
}

std::optional<State> StateFromName(std::string_view name) {
  for (const auto& [s, n] : kStates) {
    if (n == name) return s;
  }
  return std::nullopt;
}

bool IsTransitional(State state) {
  return state == State::kCreating || state == State::kStarting || state == State::kStopping ||
         state == State::kHibernating || state == State::kDeleting;
}

std::optional<Size> SizeByName(std::string_view name) {
  for (const auto& size : kSizes) {
    if (size.name == name) return size;
  }
  return std::nullopt;
}

Status ValidateName(std::string_view name, size_t max) {
  if (name.empty() || name.size() > max) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("name must be 1 to {} characters", max));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) {
      return Fail(ErrorCode::kInvalidArgument,
                  "name may contain only lowercase letters, digits and '-'");
    }
  }
  if (name.front() == '-' || name.back() == '-') {
    return Fail(ErrorCode::kInvalidArgument, "name must not start or end with '-'");
  }
  return {};
}

}  // namespace berth::workspace
