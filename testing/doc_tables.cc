#include "testing/doc_tables.h"

#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace slackswap::testutil {

std::string SourceFile(const std::string& path) {
  std::ifstream in(std::string(SLACKSWAP_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

std::vector<std::vector<std::string>> MarkdownTable(
    absl::string_view markdown, absl::string_view header_prefix) {
  std::vector<std::vector<std::string>> rows;
  bool in_table = false;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    if (!in_table) {
      in_table = absl::StartsWith(line, header_prefix);
      continue;
    }
    if (!absl::StartsWith(line, "|")) break;
    if (absl::StartsWith(line, "|---") || absl::StartsWith(line, "| ---")) {
      continue;
    }
    absl::string_view body = line;
    absl::ConsumePrefix(&body, "|");
    absl::ConsumeSuffix(&body, "|");
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(body, '|')) {
      cells.push_back(
          absl::StrReplaceAll(absl::StripAsciiWhitespace(cell), {{"**", ""}}));
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

}  // namespace slackswap::testutil
