#include "server/redis_url.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace slackswap {
namespace {

absl::Status Bad(absl::string_view url, absl::string_view why) {
  // The URL is not echoed: it may carry a password.
  return absl::InvalidArgumentError(
      absl::StrCat("--shared_store: ", why,
                   " (expected redis://[user[:password]@]host[:port][/db] or "
                   "rediss://...; the URL is ",
                   url.size(), " characters)"));
}

// Decodes %XX escapes; false on a malformed one.
bool PercentDecode(absl::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const char hi = in[i + 1];
    const char lo = in[i + 2];
    if (!absl::ascii_isxdigit(hi) || !absl::ascii_isxdigit(lo)) return false;
    auto value = [](char c) {
      return absl::ascii_isdigit(c) ? c - '0'
                                    : absl::ascii_tolower(c) - 'a' + 10;
    };
    out->push_back(static_cast<char>(value(hi) * 16 + value(lo)));
    i += 2;
  }
  return true;
}

bool ValidHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.' && c != '_') {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string RedisEndpoint::Redacted() const {
  const bool v6 = absl::StrContains(host, ':');
  return absl::StrCat(tls ? "rediss://" : "redis://",
                      password.empty() ? "" : absl::StrCat(user, ":***@"),
                      v6 ? "[" : "", host, v6 ? "]" : "", ":", port, "/", db);
}

absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url) {
  RedisEndpoint e;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "rediss://")) {
    e.tls = true;
  } else if (!absl::ConsumePrefix(&rest, "redis://")) {
    return Bad(url, "the scheme must be redis:// or rediss://");
  }
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return Bad(url, "a query or fragment is not accepted");
  }
  absl::string_view authority = rest;
  absl::string_view path;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  if (size_t at = authority.rfind('@'); at != absl::string_view::npos) {
    absl::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    absl::string_view user = userinfo;
    absl::string_view password;
    if (size_t colon = userinfo.find(':'); colon != absl::string_view::npos) {
      user = userinfo.substr(0, colon);
      password = userinfo.substr(colon + 1);
    }
    for (char c : userinfo) {
      if (absl::ascii_isspace(c) || absl::ascii_iscntrl(c)) {
        return Bad(url,
                   "a space or control character in the user or password "
                   "(escape it as %XX)");
      }
    }
    if (!PercentDecode(user, &e.user) ||
        !PercentDecode(password, &e.password)) {
      return Bad(url, "a malformed %-escape in the user or password");
    }
  }
  absl::string_view port_text;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return Bad(url, "an IPv6 address without its closing ']'");
    }
    e.host = std::string(authority.substr(0, close));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) {
      return Bad(url, "only ':port' may follow an IPv6 address");
    }
    port_text = after;
    if (e.host.empty() ||
        e.host.find_first_not_of("0123456789abcdefABCDEF:.") !=
            std::string::npos) {
      return Bad(url, "a malformed IPv6 address");
    }
  } else {
    absl::string_view host = authority;
    if (size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
      host = authority.substr(0, colon);
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return Bad(url, "an empty port");
    }
    if (!ValidHostName(host)) {
      return Bad(url, host.empty() ? "no host"
                                   : "the host has characters a host name "
                                     "cannot have");
    }
    e.host = std::string(host);
  }
  if (!port_text.empty()) {
    if (!absl::SimpleAtoi(port_text, &e.port) || e.port < 1 || e.port > 65535) {
      return Bad(url, "the port must be a number in [1, 65535]");
    }
  }
  if (!path.empty()) {
    if (!absl::SimpleAtoi(path, &e.db) || e.db < 0 || e.db > 65535) {
      return Bad(url, "the database must be a number in [0, 65535]");
    }
  }
  return e;
}

}  // namespace slackswap
