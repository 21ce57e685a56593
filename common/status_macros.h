// Early-return helpers for absl::Status and absl::StatusOr (Abseil 20220623
// has no public equivalents).
//
//   absl::Status Load(const std::string& path) {
//     SLACKSWAP_RETURN_IF_ERROR(CheckPath(path));
//     SLACKSWAP_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     ...
//   }
#ifndef SLACKSWAP_COMMON_STATUS_MACROS_H_
#define SLACKSWAP_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SLACKSWAP_RETURN_IF_ERROR(expr)                    \
  do {                                                     \
    ::absl::Status slackswap_status_ = (expr);             \
    if (!slackswap_status_.ok()) return slackswap_status_; \
  } while (0)

#define SLACKSWAP_STATUS_CONCAT_INNER_(a, b) a##b
#define SLACKSWAP_STATUS_CONCAT_(a, b) SLACKSWAP_STATUS_CONCAT_INNER_(a, b)

#define SLACKSWAP_ASSIGN_OR_RETURN(lhs, expr) \
  SLACKSWAP_ASSIGN_OR_RETURN_IMPL_(           \
      SLACKSWAP_STATUS_CONCAT_(slackswap_statusor_, __LINE__), lhs, expr)

#define SLACKSWAP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                     \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()

#endif  // SLACKSWAP_COMMON_STATUS_MACROS_H_
