// Requests as the raw text a client sends, for golden tests of header rules.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>

namespace berth::testing {

// Header lines joined with CRLF, the blank line included.
inline std::string Head(std::initializer_list<std::string_view> lines) {
  std::string out;
  for (auto line : lines) {
    out += line;
    out += "\r\n";
  }
  return out + "\r\n";
}

// The header Beast parses from `text` (which must be a whole, valid header).
inline boost::beast::http::request_header<> ParseRequest(const std::string& text) {
  boost::beast::http::request_parser<boost::beast::http::empty_body> parser;
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(text), ec);
  INFO(ec.message());
  REQUIRE(parser.is_header_done());
  return parser.get().base();
}

}  // namespace berth::testing
