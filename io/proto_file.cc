#include "io/proto_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace slackswap {
namespace {

// Keeps the first error the text-format parser reports, with its position.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) {
      error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ",
                            message);
    }
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

absl::StatusOr<FileFormat> FormatForPath(absl::string_view path) {
  if (absl::EndsWith(path, ".pb")) return FileFormat::kBinary;
  if (absl::EndsWith(path, ".txtpb")) return FileFormat::kText;
  if (absl::EndsWith(path, ".json")) return FileFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unknown file type; use .pb (binary), .txtpb (text) or .json"));
}

absl::Status ParseProto(absl::string_view data, FileFormat format,
                        absl::string_view what,
                        google::protobuf::Message* msg) {
  const std::string type = msg->GetDescriptor()->name();
  switch (format) {
    case FileFormat::kBinary:
      if (!msg->ParseFromArray(data.data(), static_cast<int>(data.size()))) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": not a valid binary ", type,
                         " (truncated, corrupt or another message type)"));
      }
      return absl::OkStatus();
    case FileFormat::kText: {
      google::protobuf::TextFormat::Parser parser;
      FirstError errors;
      parser.RecordErrorsTo(&errors);
      if (!parser.ParseFromString(std::string(data), msg)) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": not a valid text-format ", type, ": ", errors.error()));
      }
      return absl::OkStatus();
    }
    case FileFormat::kJson: {
      google::protobuf::util::JsonParseOptions options;
      auto status = google::protobuf::util::JsonStringToMessage(
          google::protobuf::StringPiece(data.data(), data.size()), msg,
          options);
      if (!status.ok()) {
        // The parser quotes the input over several lines, bytes and all:
        // keep one line of printable ASCII.
        std::string message(status.message());
        for (char& c : message) {
          if (c < 0x20 || c > 0x7e) c = c == '\n' ? ' ' : '?';
        }
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": not a valid JSON ", type, ": ",
                         absl::StripTrailingAsciiWhitespace(message)));
      }
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown format");
}

bool SerializeDeterministic(const google::protobuf::Message& msg,
                            std::string* out) {
  out->clear();
  // The streams give back unused bytes when they are destroyed.
  google::protobuf::io::StringOutputStream stream(out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  return msg.SerializeToCodedStream(&coded);
}

absl::StatusOr<std::string> SerializeProto(const google::protobuf::Message& msg,
                                           FileFormat format) {
  std::string out;
  switch (format) {
    case FileFormat::kBinary:
      if (!SerializeDeterministic(msg, &out)) {
        return absl::InternalError("cannot serialize " +
                                   msg.GetDescriptor()->name());
      }
      break;
    case FileFormat::kText:
      if (!google::protobuf::TextFormat::PrintToString(msg, &out)) {
        return absl::InternalError("cannot print " +
                                   msg.GetDescriptor()->name());
      }
      break;
    case FileFormat::kJson:
      out = ToJson(msg);
      break;
  }
  return out;
}

std::string ToJson(const google::protobuf::Message& msg) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = true;
  std::string out;
  // Only fails for messages with unresolvable Any fields, which ours lack.
  (void)google::protobuf::util::MessageToJsonString(msg, &out, options);
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream data;
  data << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  }
  // Moved out, not copied: a graph file can be hundreds of megabytes.
  return std::move(data).str();
}

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::Status ReadProtoFile(const std::string& path,
                           google::protobuf::Message* msg) {
  SLACKSWAP_ASSIGN_OR_RETURN(FileFormat format, FormatForPath(path));
  SLACKSWAP_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  return ParseProto(data, format, path, msg);
}

absl::Status WriteProtoFile(const std::string& path,
                            const google::protobuf::Message& msg) {
  SLACKSWAP_ASSIGN_OR_RETURN(FileFormat format, FormatForPath(path));
  SLACKSWAP_ASSIGN_OR_RETURN(std::string data, SerializeProto(msg, format));
  return WriteFile(path, data);
}

}  // namespace slackswap
