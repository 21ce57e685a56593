#include "io/proto_file.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "slackswap/v1/graph.pb.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

v1::OperatorGraph Sample() {
  v1::OperatorGraph g;
  g.set_name("sample");
  v1::Tensor* t = g.add_tensors();
  t->set_id(7);
  t->set_name("x");
  t->set_size_bytes(1024);
  v1::Op* op = g.add_ops();
  op->set_id(3);
  op->set_name("f");
  op->set_phase(v1::PHASE_FORWARD);
  op->add_output_ids(7);
  op->mutable_cost()->set_flops(1e9);
  return g;
}

std::string TempPath(const std::string& ext) {
  return ::testing::TempDir() + "/proto_file_test" + ext;
}

TEST(ProtoFileTest, RoundTripsEveryFormat) {
  for (const char* ext : {".pb", ".txtpb", ".json"}) {
    const std::string path = TempPath(ext);
    ASSERT_TRUE(WriteProtoFile(path, Sample()).ok()) << ext;
    v1::OperatorGraph back;
    ASSERT_TRUE(ReadProtoFile(path, &back).ok()) << ext;
    EXPECT_EQ(back.SerializeAsString(), Sample().SerializeAsString()) << ext;
  }
}

TEST(ProtoFileTest, JsonUsesProtoFieldNames) {
  std::string json = ToJson(Sample());
  EXPECT_THAT(json, HasSubstr("\"size_bytes\""));
  EXPECT_THAT(json, HasSubstr("\"output_ids\""));
}

TEST(ProtoFileTest, RejectsUnknownExtensions) {
  v1::OperatorGraph g;
  absl::Status s = ReadProtoFile("graph.yaml", &g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("graph.yaml: unknown file type"));
}

TEST(ProtoFileTest, MissingFileIsNotFound) {
  v1::OperatorGraph g;
  absl::Status s = ReadProtoFile("/nonexistent/graph.json", &g);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/nonexistent/graph.json"));
}

TEST(ProtoFileTest, GarbageAndTruncatedInputAreClearErrors) {
  v1::OperatorGraph g;
  absl::Status s = ParseProto("{not json", FileFormat::kJson, "g.json", &g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("g.json: not a valid JSON OperatorGraph"));

  s = ParseProto("ops { id: }", FileFormat::kText, "g.txtpb", &g);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("g.txtpb: not a valid text-format"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 1"));

  std::string binary = Sample().SerializeAsString();
  s = ParseProto(binary.substr(0, binary.size() - 3), FileFormat::kBinary,
                 "g.pb", &g);
  EXPECT_THAT(std::string(s.message()), HasSubstr("g.pb: not a valid binary"));
}

TEST(ProtoFileTest, AJsonErrorIsOneLineOfPrintableText) {
  // The JSON parser quotes the input, newlines and raw bytes included.
  v1::OperatorGraph g;
  absl::Status s = ParseProto("{\"name\": \"a\n\xff\xfe\",\n oops}",
                              FileFormat::kJson, "g.json", &g);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string message(s.message());
  EXPECT_THAT(message, HasSubstr("g.json: not a valid JSON OperatorGraph"));
  for (char c : message) {
    EXPECT_TRUE(c >= 0x20 && c <= 0x7e)
        << "byte " << static_cast<int>(c) << " in: " << message;
  }
}

TEST(ProtoFileTest, BinaryOutputIsDeterministic) {
  EXPECT_EQ(*SerializeProto(Sample(), FileFormat::kBinary),
            *SerializeProto(Sample(), FileFormat::kBinary));
}

}  // namespace
}  // namespace slackswap
