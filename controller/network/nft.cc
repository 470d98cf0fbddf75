#include "controller/network/nft.h"

#include <nftables/libnftables.h>

#include <fmt/format.h>

#include "common/json.h"

namespace berth::network {
namespace {

std::string Trim(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

nft_ctx* NewContext(bool json) {
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (ctx == nullptr) return nullptr;
  nft_ctx_buffer_output(ctx);
  nft_ctx_buffer_error(ctx);
  if (json) nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_JSON);
  return ctx;
}

}  // namespace

Result<std::unique_ptr<Nft>> Nft::Open() {
  nft_ctx* text = NewContext(false);
  nft_ctx* json = NewContext(true);
  if (text == nullptr || json == nullptr) {
    if (text) nft_ctx_free(text);
    if (json) nft_ctx_free(json);
    return Fail(ErrorCode::kUnavailable, "libnftables: cannot create a context");
  }
  return std::unique_ptr<Nft>(new Nft(text, json));
}

Nft::~Nft() {
  nft_ctx_free(text_);
  nft_ctx_free(json_);
}

Status Nft::Run(const std::string& batch) {
  std::lock_guard lock(mutex_);
  int rc = nft_run_cmd_from_buffer(text_, batch.c_str());
  std::string error = Trim(nft_ctx_get_error_buffer(text_));
  (void)nft_ctx_get_output_buffer(text_);  // reading resets it for the next command
  if (rc != 0) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("nftables refused the change: {}", error.empty() ? "(no message)" : error));
  }
  return {};
}

Result<nlohmann::json> Nft::Json(const std::string& command) {
  std::lock_guard lock(mutex_);
  int rc = nft_run_cmd_from_buffer(json_, command.c_str());
  std::string output = Trim(nft_ctx_get_output_buffer(json_));
  std::string error = Trim(nft_ctx_get_error_buffer(json_));
  if (rc != 0) {
    // A missing object reads as not_found ("No such file or directory" from the kernel).
    bool missing = error.find("No such file or directory") != std::string::npos;
    return Fail(missing ? ErrorCode::kNotFound : ErrorCode::kUnavailable,
                fmt::format("nft {}: {}", command, error));
  }
  // The kernel's answer through libnftables: trusted, but nested deeper than requests are.
  auto j = ParseJson(output, 256);
  if (!j) return Fail(ErrorCode::kInternal, fmt::format("nft {}: output is not JSON", command));
  return std::move(*j);
}

}  // namespace berth::network
