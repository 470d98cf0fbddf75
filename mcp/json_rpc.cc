#include "mcp/json_rpc.h"

#include <fmt/format.h>

#include "common/json.h"

namespace berth::mcp::jsonrpc {
namespace {

bool ValidId(const nlohmann::json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

}  // namespace

std::variant<Message, nlohmann::json> Classify(const nlohmann::json& value) {
  if (!value.is_object()) {
    return Error(nullptr, kInvalidRequest, "Invalid Request: a message must be a JSON object");
  }
  // The id, if it is usable, goes into the error so the client can match it.
  nlohmann::json id = nullptr;
  auto id_it = value.find("id");
  bool has_id = id_it != value.end();
  if (has_id && ValidId(*id_it)) id = *id_it;
  auto fail = [&](std::string_view why) {
    return Error(id, kInvalidRequest, std::string("Invalid Request: ") + std::string(why));
  };

  auto version = value.find("jsonrpc");
  if (version == value.end() || !version->is_string() || *version != "2.0") {
    return fail("\"jsonrpc\" must be \"2.0\"");
  }
  if (has_id && !ValidId(*id_it)) return fail("\"id\" must be a string or an integer");

  Message message;
  auto method = value.find("method");
  if (method == value.end()) {
    // A response (to a request of ours; this server sends none, but they are not errors).
    bool has_result = value.contains("result");
    bool has_error = value.contains("error");
    if (!has_id || has_result == has_error) {
      return fail("a message needs a \"method\", or an \"id\" with \"result\" or \"error\"");
    }
    message.kind = Message::Kind::kResponse;
    message.id = id;
    return message;
  }
  if (!method->is_string() || method->get_ref<const std::string&>().empty()) {
    return fail("\"method\" must be a non-empty string");
  }
  message.method = method->get<std::string>();
  if (auto params = value.find("params"); params != value.end() && !params->is_null()) {
    if (!params->is_object()) return fail("\"params\" must be an object");
    message.params = *params;
  }
  message.kind = has_id ? Message::Kind::kRequest : Message::Kind::kNotification;
  message.id = id;
  return message;
}

nlohmann::json Result(const nlohmann::json& id, nlohmann::json result) {
  nlohmann::json out = nlohmann::json::object();
  out["jsonrpc"] = "2.0";
  out["id"] = id;
  out["result"] = std::move(result);
  return out;
}

nlohmann::json Error(const nlohmann::json& id, int code, std::string_view message,
                     const std::optional<nlohmann::json>& data) {
  nlohmann::json error = nlohmann::json::object();
  error["code"] = code;
  error["message"] = std::string(message);
  if (data) error["data"] = *data;
  nlohmann::json out = nlohmann::json::object();
  out["jsonrpc"] = "2.0";
  out["id"] = id;
  out["error"] = std::move(error);
  return out;
}

nlohmann::json ParseErrorResponse(const berth::Error& error) {
  return Error(nullptr, kParseError, fmt::format("Parse error: {}", error.message));
}

std::string Dump(const nlohmann::json& message) { return DumpJson(message); }

}  // namespace berth::mcp::jsonrpc
