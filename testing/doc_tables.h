// Test-only: the tables in the project's Markdown docs, so tests can check
// the figures written there against what the code computes (golden tests:
// a doc cannot drift from the code).
//
//   std::string doc = SourceFile("docs/PLANNERS.md");
//   std::vector<std::vector<std::string>> rows =
//       MarkdownTable(doc, "| model | budget | slackswap | bound |");
//   // rows[0] == {"bert-large", "0.3", "90.25%", ...}
#ifndef SLACKSWAP_TESTING_DOC_TABLES_H_
#define SLACKSWAP_TESTING_DOC_TABLES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace slackswap::testutil {

// A file of the source tree (SLACKSWAP_SOURCE_DIR), whole; fails the
// current test if it cannot be read.
std::string SourceFile(const std::string& path);

// The body rows of the first table whose header line starts with
// `header_prefix`, each as its cells, trimmed, with Markdown bold (**)
// removed. Empty when there is no such table.
std::vector<std::vector<std::string>> MarkdownTable(
    absl::string_view markdown, absl::string_view header_prefix);

}  // namespace slackswap::testutil

#endif  // SLACKSWAP_TESTING_DOC_TABLES_H_
