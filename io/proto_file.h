// Reads and writes protobuf messages as files, the format chosen by the
// extension: .pb (binary), .txtpb (text format) or .json (JSON mapping with
// the .proto field names).
//
//   v1::OperatorGraph g;
//   absl::Status s = ReadProtoFile("bert.json", &g);
//   s = WriteProtoFile("bert.pb", g);
#ifndef SLACKSWAP_IO_PROTO_FILE_H_
#define SLACKSWAP_IO_PROTO_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace slackswap {

enum class FileFormat { kBinary, kText, kJson };

// INVALID_ARGUMENT for an extension other than .pb, .txtpb or .json.
absl::StatusOr<FileFormat> FormatForPath(absl::string_view path);

// Errors name the file and, for text and JSON, what the parser said.
absl::Status ParseProto(absl::string_view data, FileFormat format,
                        absl::string_view what, google::protobuf::Message* msg);
// The binary serialization with map entries in key order, so equal messages
// give equal bytes (cache keys, comparisons). False if it cannot be
// serialized (over 2 GiB).
bool SerializeDeterministic(const google::protobuf::Message& msg,
                            std::string* out);

absl::StatusOr<std::string> SerializeProto(const google::protobuf::Message& msg,
                                           FileFormat format);

absl::Status ReadProtoFile(const std::string& path,
                           google::protobuf::Message* msg);
absl::Status WriteProtoFile(const std::string& path,
                            const google::protobuf::Message& msg);

// JSON with the .proto field names, every field printed, deterministic.
std::string ToJson(const google::protobuf::Message& msg);

absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFile(const std::string& path, absl::string_view data);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_PROTO_FILE_H_
