#include "io/graph_file.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "slackswap/v1/graph.pb.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/graph_file_test_" + name;
}

// A generated workload as its message: tensors with rebuild recipes
// (dropout masks), ids from 0.
v1::OperatorGraph Bert() {
  absl::StatusOr<TransformerConfig> c = FindWorkload("bert-large");
  EXPECT_TRUE(c.ok());
  c->layers = 2;
  absl::StatusOr<Graph> g = BuildTransformer(*c);
  EXPECT_TRUE(g.ok()) << g.status();
  return GraphToProto(*g);
}

// What ReadProtoFile then GraphFromProto make of `path`: the graph as its
// message, or the error the CLI gave for it ("PATH: " before a conversion
// error).
std::string Expected(const std::string& path) {
  v1::OperatorGraph pb;
  absl::Status read = ReadProtoFile(path, &pb);
  if (!read.ok()) return read.ToString();
  absl::StatusOr<Graph> g = GraphFromProto(pb);
  if (!g.ok()) {
    return absl::Status(g.status().code(),
                        absl::StrCat(path, ": ", g.status().message()))
        .ToString();
  }
  return GraphToProto(*g).SerializeAsString();
}

std::string Actual(const std::string& path) {
  absl::StatusOr<Graph> g = ReadGraphFile(path);
  if (!g.ok()) return g.status().ToString();
  return GraphToProto(*g).SerializeAsString();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  ASSERT_TRUE(WriteFile(path, bytes).ok());
}

TEST(GraphFileTest, EveryFormatGivesTheGraphOfItsMessage) {
  for (const char* ext : {".pb", ".txtpb", ".json"}) {
    const std::string path = TempPath(std::string("bert") + ext);
    ASSERT_TRUE(WriteProtoFile(path, Bert()).ok());
    absl::StatusOr<Graph> g = ReadGraphFile(path);
    ASSERT_TRUE(g.ok()) << g.status();
    if (std::string(ext) == ".pb") {
      absl::StatusOr<std::optional<Graph>> streamed =
          StreamGraphFile(path, nullptr);
      ASSERT_TRUE(streamed.ok() && streamed->has_value());
      EXPECT_EQ(GraphToProto(**streamed).SerializeAsString(),
                GraphToProto(*g).SerializeAsString());
    }
    EXPECT_EQ(GraphToProto(*g).SerializeAsString(),
              GraphToProto(*GraphFromProto(Bert())).SerializeAsString())
        << ext;
    EXPECT_EQ(g->name, Bert().name());
    EXPECT_GT(g->index.saved.size(), 0u);
  }
}

TEST(GraphFileTest, SparseIdsAndNamesLikeTheMessage) {
  v1::OperatorGraph pb = Bert();
  // Ids out of order and far apart: the index is a table, not a run.
  for (v1::Tensor& t : *pb.mutable_tensors()) t.set_id(t.id() * 7 + 1000);
  for (v1::Op& o : *pb.mutable_ops()) {
    for (int64_t& id : *o.mutable_input_ids()) id = id * 7 + 1000;
    for (int64_t& id : *o.mutable_output_ids()) id = id * 7 + 1000;
  }
  for (v1::Tensor& t : *pb.mutable_tensors()) {
    if (!t.has_rebuild()) continue;
    for (int64_t& id : *t.mutable_rebuild()->mutable_input_ids()) {
      id = id * 7 + 1000;
    }
  }
  pb.mutable_tensors()->SwapElements(0, 5);
  pb.set_description("sparse");
  const std::string path = TempPath("sparse.pb");
  ASSERT_TRUE(WriteProtoFile(path, pb).ok());
  EXPECT_EQ(Actual(path), Expected(path));
  absl::StatusOr<std::optional<Graph>> streamed = StreamGraphFile(path, {});
  EXPECT_TRUE(streamed.ok() && streamed->has_value());
  absl::StatusOr<Graph> g = ReadGraphFile(path);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->description, "sparse");

  // A second name after the ops: the last one counts, as in the message.
  v1::OperatorGraph renamed;
  renamed.set_name("renamed");
  const std::string twice = TempPath("twice.pb");
  WriteBytes(twice, pb.SerializeAsString() + renamed.SerializeAsString());
  EXPECT_EQ(Actual(twice), Expected(twice));
  streamed = StreamGraphFile(twice, {});
  ASSERT_TRUE(streamed.ok() && streamed->has_value());
  EXPECT_EQ((*streamed)->name, "renamed");
  EXPECT_EQ((*streamed)->description, "sparse");
}

// Files the stream leaves to the message's parser, and bad graphs: the same
// graph or the same error either way.
TEST(GraphFileTest, AnyOtherFileGetsTheMessagesAnswer) {
  const v1::OperatorGraph bert = Bert();
  const std::string whole = bert.SerializeAsString();
  v1::OperatorGraph dangling = bert;
  dangling.mutable_ops(3)->add_input_ids(987654);
  v1::OperatorGraph duplicate = bert;
  duplicate.mutable_tensors(4)->set_id(2);
  v1::OperatorGraph bad_phase = bert;
  bad_phase.mutable_ops(1)->set_phase(v1::PHASE_UNSPECIFIED);
  v1::OperatorGraph no_ops = bert;
  no_ops.clear_ops();
  v1::OperatorGraph tensor_last;
  tensor_last.set_name("reordered");
  tensor_last.mutable_ops()->CopyFrom(bert.ops());
  // Tensors after ops, and two names (the last one counts).
  std::string reordered = tensor_last.SerializeAsString();
  for (const v1::Tensor& t : bert.tensors()) {
    v1::OperatorGraph one;
    *one.add_tensors() = t;
    reordered += one.SerializeAsString();
  }
  v1::OperatorGraph second_name;
  second_name.set_name("second");
  reordered += second_name.SerializeAsString();
  // An unknown top-level field (99, varint 1), and a name that is not
  // UTF-8.
  const std::string unknown = whole + std::string("\x98\x06\x01", 3);
  const std::string not_utf8 = whole + std::string("\x0a\x02\xff\xfe", 4);
  // A zero tag, cut short, a length past the end.
  const std::string zero_tag = whole + std::string(1, '\0');
  const std::string cut = whole.substr(0, whole.size() - 7);
  const std::string too_long = whole + std::string("\x22\x7f\x08", 3);

  const std::pair<const char*, std::string> cases[] = {
      {"dangling", dangling.SerializeAsString()},
      {"duplicate", duplicate.SerializeAsString()},
      {"bad_phase", bad_phase.SerializeAsString()},
      {"no_ops", no_ops.SerializeAsString()},
      {"reordered", reordered},
      {"unknown", unknown},
      {"not_utf8", not_utf8},
      {"zero_tag", zero_tag},
      {"cut", cut},
      {"too_long", too_long},
      {"empty", ""},
  };
  for (const auto& [name, bytes] : cases) {
    const std::string path = TempPath(std::string(name) + ".pb");
    WriteBytes(path, bytes);
    EXPECT_EQ(Actual(path), Expected(path)) << name;
    // None is the stream's to answer.
    absl::StatusOr<std::optional<Graph>> streamed = StreamGraphFile(path, {});
    EXPECT_TRUE(streamed.ok() && !streamed->has_value()) << name;
  }
  EXPECT_THAT(Actual(TempPath("dangling.pb")),
              HasSubstr("dangling.pb: op 3 (L0.qkv_proj): input tensor 987654 "
                        "does not exist"));
  EXPECT_THAT(Actual(TempPath("cut.pb")),
              HasSubstr("not a valid binary OperatorGraph"));
}

// A tensor wrapped in unknown groups nested around the recursion limit
// (field 99, two bytes a tag): a small element is parsed from its flat
// buffer, whose limit is one level deeper than the message's, so a deep one
// must be parsed the message's way.
TEST(GraphFileTest, DeepUnknownGroupsStreamLikeTheMessage) {
  const v1::OperatorGraph bert = Bert();
  const auto varint = [](uint64_t v) {
    std::string out;
    for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
    return out + static_cast<char>(v);
  };
  const std::string start_group = varint(99 << 3 | 3);
  const std::string end_group = varint(99 << 3 | 4);
  int accepted = 0;
  std::string plain;  // the answer without groups
  for (int depth = 0; depth <= 110; depth += depth == 0 ? 90 : 1) {
    v1::OperatorGraph head;
    head.set_name(bert.name());
    std::string bytes = head.SerializeAsString();
    for (int i = 0; i < bert.tensors_size(); ++i) {
      std::string element = bert.tensors(i).SerializeAsString();
      if (i == 0) {
        for (int d = 0; d < depth; ++d) element += start_group;
        for (int d = 0; d < depth; ++d) element += end_group;
      }
      bytes += varint(3 << 3 | 2) + varint(element.size()) + element;
    }
    v1::OperatorGraph ops;
    *ops.mutable_ops() = bert.ops();
    bytes += ops.SerializeAsString();
    const std::string path = TempPath("deep.pb");
    WriteBytes(path, bytes);
    const std::string expected = Expected(path);
    EXPECT_EQ(Actual(path), expected) << depth << " levels";
    if (depth == 0) {
      ASSERT_TRUE(ReadGraphFile(path).ok());
      plain = expected;
    } else if (expected == plain) {
      ++accepted;
    }
  }
  // The limit falls inside the range: some depths are accepted, some not.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 21);
}

// A data-parallel step: its all-reduces are ops with a collective, which the
// stream parses with the op; a bad one gets the message's error.
TEST(GraphFileTest, CollectivesStreamLikeTheMessage) {
  WorkloadOverrides o;
  o.layers = 2;
  o.data_parallel = 8;
  absl::StatusOr<Graph> ddp = BuildWorkload("bert-large", o);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  const v1::OperatorGraph pb = GraphToProto(*ddp);
  int collectives = 0;
  for (const v1::Op& op : pb.ops()) collectives += op.has_collective();
  ASSERT_GT(collectives, 1);
  for (const char* ext : {".pb", ".txtpb", ".json"}) {
    const std::string path = TempPath(std::string("ddp") + ext);
    ASSERT_TRUE(WriteProtoFile(path, pb).ok());
    EXPECT_EQ(Actual(path), Expected(path)) << ext;
    EXPECT_EQ(Actual(path), pb.SerializeAsString()) << ext;
  }
  const std::string path = TempPath("ddp.pb");
  absl::StatusOr<std::optional<Graph>> streamed = StreamGraphFile(path, {});
  ASSERT_TRUE(streamed.ok() && streamed->has_value());
  int streamed_collectives = 0;
  for (const Op& op : (*streamed)->ops) {
    if (!op.collective.has_value()) continue;
    ++streamed_collectives;
    EXPECT_EQ(op.collective->group.size(), 8u);
    EXPECT_GE(op.collective->bytes, 1);
  }
  EXPECT_EQ(streamed_collectives, collectives);

  v1::OperatorGraph bad = pb;
  for (v1::Op& op : *bad.mutable_ops()) {
    if (!op.has_collective()) continue;
    op.mutable_collective()->set_kind(static_cast<v1::CollectiveKind>(42));
    break;
  }
  const std::string bad_path = TempPath("ddp_bad_kind.pb");
  WriteBytes(bad_path, bad.SerializeAsString());
  EXPECT_EQ(Actual(bad_path), Expected(bad_path));
  EXPECT_THAT(Actual(bad_path),
              HasSubstr("ddp.all_reduce.bucket0): collective.kind has unknown "
                        "value 42"));
  streamed = StreamGraphFile(bad_path, {});
  EXPECT_TRUE(streamed.ok() && !streamed->has_value());
}

TEST(GraphFileTest, MissingFilesAndUnknownTypes) {
  EXPECT_EQ(ReadGraphFile(TempPath("absent.pb")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadGraphFile(TempPath("graph.yaml")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Actual(TempPath("absent.pb")), Expected(TempPath("absent.pb")));
}

TEST(GraphFileTest, StopsWhenAsked) {
  // Large enough for the stop function to be asked (every few thousand
  // elements).
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", {});
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string path = TempPath("stopped.pb");
  ASSERT_TRUE(WriteProtoFile(path, GraphToProto(*g)).ok());
  EXPECT_EQ(ReadGraphFile(path, [] { return true; }).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE(ReadGraphFile(path, [] { return false; }).ok());
}

}  // namespace
}  // namespace slackswap
