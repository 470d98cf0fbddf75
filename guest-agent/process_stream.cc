#include "guest-agent/process_stream.h"

namespace berth::agent {
namespace {

using protocol::ExecEvent;

// Holds back an incomplete trailing UTF-8 sequence per stream until the next read completes it.
class Utf8Framer {
 public:
  // The event for `item`'s data plus what was held back; nullopt when all of it is held back.
  std::optional<ExecEvent> Frame(const Process::Item& item) {
    int s = static_cast<int>(item.stream);
    std::string& held = held_[s];
    uint64_t offset = item.offset - held.size();
    std::string data = std::move(held);
    held.clear();
    data += item.data;
    size_t complete = protocol::CompleteUtf8Prefix(data);
    held = data.substr(complete);
    held_offset_[s] = offset + complete;
    data.resize(complete);
    if (data.empty()) return std::nullopt;
    return Make(item.stream, offset, std::move(data));
  }
  // What is still held back (never completed), as events of their own.
  std::vector<ExecEvent> Flush() {
    std::vector<ExecEvent> out;
    for (int s = 0; s < 2; ++s) {
      if (held_[s].empty()) continue;
      out.push_back(Make(static_cast<OutputStream>(s), held_offset_[s], std::move(held_[s])));
      held_[s].clear();
    }
    return out;
  }

 private:
  static ExecEvent Make(OutputStream stream, uint64_t offset, std::string data) {
    ExecEvent e(stream == OutputStream::kStdout ? ExecEvent::Type::kStdout
                                                 : ExecEvent::Type::kStderr);
    e.offset = offset;
    e.data = std::move(data);
    return e;
  }
  std::string held_[2];
  uint64_t held_offset_[2] = {0, 0};
};

}  // namespace

http::Task<Status> WriteEvent(http::Exchange& ex, const ExecEvent& event) {
  std::string line = event.ToLine();
  line.push_back('\n');
  co_return co_await ex.WriteChunk(line);
}

http::Task<Status> StreamOutputEvents(http::Exchange& ex, Process& process,
                                      Process::Reader& reader, bool follow) {
  Utf8Framer framer;
  for (;;) {
    // Not a ?: with co_await in one branch: g++ 12 destroys the result twice.
    Process::Item item;
    if (follow) {
      item = co_await reader.Next(kKeepaliveInterval);
    } else {
      item = reader.Poll();
    }
    if (item.kind == Process::Item::Kind::kData) {
      auto event = framer.Frame(item);
      if (!event) continue;
      auto status = co_await WriteEvent(ex, *event);
      if (!status) co_return status;
      continue;
    }
    if (item.kind == Process::Item::Kind::kTimeout && follow) {
      ExecEvent keepalive(ExecEvent::Type::kKeepalive);
      auto status = co_await WriteEvent(ex, keepalive);
      if (!status) co_return status;
      continue;
    }
    if (item.kind == Process::Item::Kind::kWoken) continue;
    // The end of the output (kEnd), or of what is buffered now (kTimeout without follow).
    for (const auto& event : framer.Flush()) {
      auto status = co_await WriteEvent(ex, event);
      if (!status) co_return status;
    }
    if (item.kind == Process::Item::Kind::kEnd) {
      ExecEvent end(ExecEvent::Type::kEnd);
      end.exit = process.exit_status();
      auto status = co_await WriteEvent(ex, end);
      if (!status) co_return status;
    }
    co_return Status{};
  }
}

}  // namespace berth::agent
