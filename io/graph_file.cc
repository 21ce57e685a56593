#include "io/graph_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "slackswap/v1/graph.pb.h"

namespace slackswap {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::FileInputStream;
using google::protobuf::io::StringOutputStream;

// OperatorGraph's fields, as graph.proto numbers them (2, between them, is
// the description).
constexpr int kNameField = 1;
constexpr int kTensorsField = 3;
constexpr int kOpsField = 4;

// Read in blocks of this many bytes: the file is never in memory whole.
constexpr int kBlockBytes = 1 << 16;

// Converting stops at this many tensors or ops (GraphFromProto's limit).
constexpr int64_t kMaxEntities = std::numeric_limits<int32_t>::max() / 2;

// Closes the file it holds.
class File {
 public:
  explicit File(const std::string& path) : fd_(open(path.c_str(), O_RDONLY)) {}
  ~File() {
    if (fd_ >= 0) close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

// One top-level field of the file, as the stream takes it: a length-
// delimited name, description, tensor or op. False at the end of the file
// (`*end`) or at anything else (a field the stream leaves to the message's
// parser).
bool NextField(CodedInputStream& in, int64_t size, int* field, uint32_t* len,
               bool* end) {
  *end = in.CurrentPosition() == size;
  if (*end) return false;
  const uint32_t tag = in.ReadTagNoLastTag();
  if (WireFormatLite::GetTagWireType(tag) !=
      WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
    return false;
  }
  *field = WireFormatLite::GetTagFieldNumber(tag);
  return *field >= kNameField && *field <= kOpsField && in.ReadVarint32(len);
}

absl::Status Stopped() {
  return absl::CancelledError("converting the graph stopped");
}

// Counts the tensors and ops, skipping over them: false if the file is not
// one the stream takes.
absl::StatusOr<bool> Count(int fd, int64_t size, StopPoller& poller,
                           int64_t* tensors, int64_t* ops) {
  FileInputStream file(fd, kBlockBytes);
  CodedInputStream in(&file);
  int field = 0;
  uint32_t len = 0;
  bool end = false;
  while (NextField(in, size, &field, &len, &end)) {
    if (poller.Stop()) return Stopped();
    // Tensors after ops would be checked in another order than the
    // message's conversion checks them.
    if (field == kTensorsField && *ops > 0) return false;
    if (field == kTensorsField) ++*tensors;
    if (field == kOpsField) ++*ops;
    if (!in.Skip(static_cast<int>(len))) return false;
  }
  return end && *tensors <= kMaxEntities && *ops <= kMaxEntities;
}

// Elements this small are parsed from their flat buffer (below).
constexpr size_t kFlatParseBytes = 128;

// Parses one tensor or op as the whole file's parser would: one level of
// nesting down, ending where its length says. An element of at most
// kFlatParseBytes is parsed from its flat buffer, which skips a coded
// stream's per-buffer bookkeeping (about a fifth of the parse) but not its
// recursion limit, one level deeper: each level of nesting takes at least
// two bytes (a tag, and a length or an end-group tag), so such an element
// nests at most 64 deep and neither limit can bind.
template <typename Message>
bool ParseElement(const std::string& bytes, Message* m) {
  if (bytes.size() <= kFlatParseBytes) {
    return m->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  }
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                      static_cast<int>(bytes.size()));
  in.SetRecursionLimit(CodedInputStream::GetDefaultRecursionLimit() - 1);
  return m->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

}  // namespace

// An error in the graph leaves it to the message's path, which finds it
// again and reports it as it always has.
absl::StatusOr<std::optional<Graph>> StreamGraphFile(const std::string& path,
                                                     const StopFn& stop) {
  File file(path);
  struct stat st;
  if (file.fd() < 0 || fstat(file.fd(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  const int64_t size = st.st_size;
  StopPoller poller(stop);
  int64_t tensors = 0, ops = 0;
  SLACKSWAP_ASSIGN_OR_RETURN(const bool counted,
                             Count(file.fd(), size, poller, &tensors, &ops));
  if (!counted || lseek(file.fd(), 0, SEEK_SET) != 0) return std::nullopt;
  FileInputStream stream(file.fd(), kBlockBytes);
  CodedInputStream in(&stream);
  GraphConverter converter(stop);
  converter.Reserve(tensors, ops);
  // The name and description, merged into a message of their own as they
  // come: its parser keeps the last of each and checks their UTF-8.
  v1::OperatorGraph named;
  v1::Tensor tensor;
  v1::Op op;
  std::string bytes;
  int field = 0;
  uint32_t len = 0;
  bool end = false;
  while (NextField(in, size, &field, &len, &end)) {
    if (poller.Stop()) return Stopped();
    if (!in.ReadString(&bytes, static_cast<int>(len))) return std::nullopt;
    absl::Status added;
    if (field == kTensorsField) {
      if (!ParseElement(bytes, &tensor)) return std::nullopt;
      added = converter.AddTensor(tensor);
    } else if (field == kOpsField) {
      if (!ParseElement(bytes, &op)) return std::nullopt;
      added = converter.AddOp(op);
    } else {
      std::string wire;
      {
        StringOutputStream stream(&wire);
        CodedOutputStream out(&stream);
        WireFormatLite::WriteBytes(field, bytes, &out);
      }
      if (!named.MergeFromString(wire)) return std::nullopt;
    }
    if (absl::IsCancelled(added)) return added;
    if (!added.ok()) return std::nullopt;
  }
  if (!end) return std::nullopt;
  converter.SetNames(named.name(), named.description());
  absl::StatusOr<Graph> g = std::move(converter).Finish();
  if (absl::IsCancelled(g.status())) return g.status();
  if (!g.ok()) return std::nullopt;
  return std::optional<Graph>(*std::move(g));
}

absl::StatusOr<Graph> ReadGraphFile(const std::string& path,
                                    const StopFn& stop) {
  SLACKSWAP_ASSIGN_OR_RETURN(FileFormat format, FormatForPath(path));
  if (format == FileFormat::kBinary) {
    SLACKSWAP_ASSIGN_OR_RETURN(std::optional<Graph> g,
                               StreamGraphFile(path, stop));
    if (g.has_value()) return *std::move(g);
  }
  // The message on an arena: one allocation per block, all freed at once.
  google::protobuf::Arena arena;
  auto* pb = google::protobuf::Arena::CreateMessage<v1::OperatorGraph>(&arena);
  SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(path, pb));
  absl::StatusOr<Graph> g = GraphFromProto(*pb, stop);
  if (!g.ok()) {
    return absl::Status(g.status().code(),
                        absl::StrCat(path, ": ", g.status().message()));
  }
  return g;
}

}  // namespace slackswap
