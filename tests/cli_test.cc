// End-to-end tests of the `slackswap` binary: each test spawns the real
// executable (its path is compiled in as SLACKSWAP_BIN), captures stdout,
// stderr and the exit status, and checks what a user would see. Files the
// tests write live under ::testing::TempDir().
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/version.h"
#include "gmock/gmock.h"
#include "google/protobuf/message.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/workloads.h"
#include "planner/policy.h"
#include "slackswap/v1/graph.pb.h"
#include "slackswap/v1/planner_service.pb.h"
#include "slackswap/v1/report.pb.h"
#include "slackswap/v1/simulation.pb.h"
#include "testing/doc_tables.h"
#include "testing/hostile_graphs.h"
#include "testing/reference.h"

extern char** environ;

namespace slackswap {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::slackswap::testutil::At;
using ::slackswap::testutil::Number;
using ::slackswap::testutil::Reference;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kHardware[] = "a100-80gb-pcie4";

// ReadFile and WriteFile (io/proto_file.h), a test failure on error.
std::string ReadAll(const std::string& path) {
  absl::StatusOr<std::string> data = ReadFile(path);
  EXPECT_TRUE(data.ok()) << data.status();
  return data.value_or("");
}

void WriteAll(const std::string& path, const std::string& data) {
  const absl::Status written = WriteFile(path, data);
  ASSERT_TRUE(written.ok()) << written;
}

// This process's scratch directory under TempDir(); removed at exit unless a
// test failed (then its files are kept for a look).
std::string ScratchDir() {
  std::string dir = ::testing::TempDir();
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return absl::StrCat(dir, "slackswap_cli_test.", getpid());
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ignored;
    std::filesystem::remove_all(ScratchDir(), ignored);
  }
};
[[maybe_unused]] ::testing::Environment* const kScratchCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

// A path in a directory private to this process and test.
std::string TempPath(const std::string& name) {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info == nullptr ? std::string("global")
                                     : absl::StrCat(info->test_suite_name(),
                                                    ".", info->name());
  for (char& c : test) {
    if (c == '/') c = '_';
  }
  const std::string dir = absl::StrCat(ScratchDir(), "/", test);
  std::error_code ignored;
  std::filesystem::create_directories(dir, ignored);
  return absl::StrCat(dir, "/", name);
}

struct Outcome {
  bool exited = false;  // false: killed by a signal (a crash)
  int code = -1;        // exit status, or the signal number
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  // Escaped, so stray bytes and line breaks show as what they are.
  return os << (o.exited ? "exit " : "signal ") << o.code << "\n--- stdout\n"
            << absl::CHexEscape(o.out.substr(0, 2000)) << "\n--- stderr\n"
            << absl::CHexEscape(o.err.substr(0, 2000));
}

// Runs `slackswap args...` with stdout and stderr captured separately.
Outcome RunBinary(const char* binary, const std::vector<std::string>& args) {
  static int runs = 0;
  const std::string out_path = TempPath(absl::StrCat("run", runs, ".stdout"));
  const std::string err_path = TempPath(absl::StrCat("run", runs, ".stderr"));
  ++runs;

  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  Outcome o;
  const int rc =
      posix_spawn(&pid, binary, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    o.err = absl::StrCat("posix_spawn failed: ", rc);
    return o;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {  // retry only when a signal interrupted the wait
      ADD_FAILURE() << "waitpid(" << pid << "): " << std::strerror(errno);
      return o;
    }
  }
  if (WIFEXITED(status)) {
    o.exited = true;
    o.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    o.code = WTERMSIG(status);
  }
  o.out = ReadAll(out_path);
  o.err = ReadAll(err_path);
  return o;
}

// Whether `json` parses as `message`; the parser's error and the start of
// the text when not.
::testing::AssertionResult ParsedJson(const std::string& json,
                                      google::protobuf::Message* message) {
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, message);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.ToString() << "\n"
                                       << json.substr(0, 2000);
}

Outcome Slackswap(const std::vector<std::string>& args) {
  return RunBinary(SLACKSWAP_BIN, args);
}

v1::SimulationResult ParseResult(const std::string& json) {
  v1::SimulationResult r;
  EXPECT_TRUE(ParsedJson(json, &r));
  return r;
}

// Runs a command expected to succeed with --json output and parses it.
v1::SimulationResult SimulateJson(const std::vector<std::string>& args) {
  Outcome o = Slackswap(args);
  EXPECT_TRUE(o.exited && o.code == 0) << o;
  EXPECT_EQ(o.err, "");
  return ParseResult(o.out);
}

// A failure as main.cc reports it: exit status 1, nothing on stdout and
// exactly one line `CODE: message` on stderr.
void ExpectOneLineError(const Outcome& o, const std::string& code,
                        const std::string& names) {
  EXPECT_TRUE(o.exited) << "crashed: " << o;
  EXPECT_EQ(o.code, 1) << o;
  EXPECT_EQ(o.out, "") << o;
  EXPECT_THAT(o.err, StartsWith(code + ": ")) << o;
  EXPECT_TRUE(absl::EndsWith(o.err, "\n")) << o;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1)
      << "want exactly one line on stderr: " << o;
  EXPECT_THAT(o.err, HasSubstr(names)) << o;
}

// --- Reference workloads --------------------------------------------------

// The reference's ideal step: the sum of every op's forward and backward
// est_time_us on the reference hardware, with the layer repeated L times.
double ReferenceIdealStepNs(const std::string& model) {
  const Struct& variant =
      At(Reference(), {"models", model, "attention", "flash"}).struct_value();
  const double layers = Number(Reference(), {"models", model, "config", "L"});
  double us = 0;
  for (const std::string section : {"pre_ops", "layer_ops", "post_ops"}) {
    double section_us = 0;
    for (const Value& op : variant.fields().at(section).list_value().values()) {
      const auto& est = op.struct_value()
                            .fields()
                            .at("est_time_us")
                            .struct_value()
                            .fields()
                            .at(kHardware)
                            .list_value();
      for (const Value& v : est.values()) section_us += v.number_value();
    }
    us += section == "layer_ops" ? layers * section_us : section_us;
  }
  return us * 1000;
}

class ReferenceWorkloadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceWorkloadTest, NoBudgetRunsAtIdealSpeedWithReferenceFigures) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  const std::string model = GetParam();
  ASSERT_EQ(
      At(Reference(), {"models", model, "reference_attention"}).string_value(),
      "flash");
  // The reference froze one efficiency per kernel kind: the catalog profile
  // without its shape tables, sent as a file (an inline profile).
  std::string frozen_json;
  ASSERT_TRUE(
      google::protobuf::util::MessageToJsonString(
          HardwareToProto(testutil::FrozenCostModel(*FindHardware(kHardware))),
          &frozen_json)
          .ok());
  const std::string frozen = TempPath("frozen-hardware.json");
  WriteAll(frozen, frozen_json);
  v1::SimulationResult r = SimulateJson(
      {"simulate", "--workload", model, "--hardware", frozen, "--json"});
  EXPECT_TRUE(r.feasible()) << r.infeasible_reason();
  EXPECT_EQ(r.throughput_retained(), 1.0);
  EXPECT_EQ(r.step_ns(), r.ideal_step_ns());
  EXPECT_EQ(r.budget_bytes(), 0);
  EXPECT_EQ(r.d2h_bytes(), 0);
  EXPECT_EQ(r.h2d_bytes(), 0);
  EXPECT_EQ(r.recompute_ns(), 0);

  const double ref_peak =
      Number(Reference(), {"models", model, "attention", "flash", "totals",
                           "unconstrained_activation_peak_bytes"});
  EXPECT_NEAR(static_cast<double>(r.peak_activation_bytes()), ref_peak,
              0.02 * ref_peak);
  EXPECT_NEAR(static_cast<double>(r.unconstrained_peak_bytes()), ref_peak,
              0.02 * ref_peak);

  const double ref_ideal = ReferenceIdealStepNs(model);
  EXPECT_NEAR(static_cast<double>(r.ideal_step_ns()), ref_ideal,
              0.03 * ref_ideal);
}

INSTANTIATE_TEST_SUITE_P(Presets, ReferenceWorkloadTest,
                         ::testing::Values("bert-large", "gpt2-xl", "llama-7b"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// --- Bad input: one line on stderr, exit 1, no crash ------------------------

TEST(BadInputTest, GarbageJsonGraph) {
  const std::string path = TempPath("graph.json");
  WriteAll(path, "{not json");
  ExpectOneLineError(Slackswap({"simulate", "--graph", path}),
                     "INVALID_ARGUMENT", path);
}

TEST(BadInputTest, RandomBytesAsJsonGraph) {
  std::mt19937 rng(42);
  std::string bytes(512, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  const std::string path = TempPath("graph.json");
  WriteAll(path, bytes);
  ExpectOneLineError(Slackswap({"simulate", "--graph", path}),
                     "INVALID_ARGUMENT", path);
}

TEST(BadInputTest, RandomBytesAsTextGraph) {
  std::mt19937 rng(7);
  std::string bytes(512, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  const std::string path = TempPath("graph.txtpb");
  WriteAll(path, bytes);
  ExpectOneLineError(Slackswap({"simulate", "--graph", path}),
                     "INVALID_ARGUMENT", path);
}

TEST(BadInputTest, TruncatedBinaryGraph) {
  const std::string path = TempPath("x.pb");
  Outcome w = Slackswap(
      {"workload", "--workload", "gpt2-xl", "--layers", "2", "--out", path});
  ASSERT_EQ(w.code, 0) << w;
  std::string data = ReadAll(path);
  ASSERT_GT(data.size(), 1000u);
  // Cut inside a tensor or op message so the length prefixes run past the
  // end; any cut must be rejected, never crash.
  for (size_t cut : {data.size() / 2 + 3, data.size() - 1, size_t{7}}) {
    SCOPED_TRACE(absl::StrCat("truncated to ", cut, " of ", data.size()));
    WriteAll(path, data.substr(0, cut));
    ExpectOneLineError(Slackswap({"simulate", "--graph", path}),
                       "INVALID_ARGUMENT", path);
  }
}

TEST(BadInputTest, GraphWithACycle) {
  // f reads b, which g (launched after f) makes from f's output a.
  const std::string path = TempPath("cycle.txtpb");
  WriteAll(path, R"pb(
    name: "cycle"
    tensors { id: 1 name: "a" size_bytes: 100 }
    tensors { id: 2 name: "b" size_bytes: 100 }
    ops { id: 1 name: "f" phase: PHASE_FORWARD input_ids: 2 output_ids: 1 }
    ops { id: 2 name: "g" phase: PHASE_FORWARD input_ids: 1 output_ids: 2 }
    ops { id: 3 name: "f.bwd" phase: PHASE_BACKWARD input_ids: 1 }
  )pb");
  Outcome o = Slackswap({"simulate", "--graph", path});
  ExpectOneLineError(o, "INVALID_ARGUMENT", "cycle");
  EXPECT_THAT(o.err, HasSubstr(path));
}

TEST(BadInputTest, GraphWithADanglingId) {
  const std::string path = TempPath("dangling.txtpb");
  WriteAll(path, R"pb(
    name: "dangling"
    tensors { id: 1 name: "a" size_bytes: 100 }
    ops { id: 1 name: "f" phase: PHASE_FORWARD output_ids: 1 }
    ops { id: 2 name: "f.bwd" phase: PHASE_BACKWARD input_ids: 1 input_ids: 42 }
  )pb");
  Outcome o = Slackswap({"simulate", "--graph", path});
  ExpectOneLineError(o, "INVALID_ARGUMENT", "42");
  EXPECT_THAT(o.err, HasSubstr(path));
}

TEST(BadInputTest, MissingGraphFile) {
  const std::string path = TempPath("absent.json");
  ExpectOneLineError(Slackswap({"simulate", "--graph", path}), "NOT_FOUND",
                     path);
}

TEST(BadInputTest, UnknownWorkload) {
  ExpectOneLineError(Slackswap({"simulate", "--workload", "gpt-17"}),
                     "NOT_FOUND", "gpt-17");
}

TEST(BadInputTest, UnknownHardware) {
  ExpectOneLineError(Slackswap({"simulate", "--workload", "gpt2-xl",
                                "--hardware", "abacus-9000"}),
                     "NOT_FOUND", "abacus-9000");
}

TEST(BadInputTest, BadBudgets) {
  for (const std::string budget : {"lots", "-0.5", "0", "12parsecs", "nan"}) {
    SCOPED_TRACE(budget);
    ExpectOneLineError(
        Slackswap({"simulate", "--workload", "gpt2-xl", "--budget", budget}),
        "INVALID_ARGUMENT", "budget");
  }
}

TEST(BadInputTest, UnknownFlag) {
  ExpectOneLineError(
      Slackswap({"simulate", "--workload", "gpt2-xl", "--frobnicate", "3"}),
      "INVALID_ARGUMENT", "--frobnicate");
  ExpectOneLineError(Slackswap({"workload", "--workload", "gpt2-xl", "--out",
                                TempPath("g.json"), "--json"}),
                     "INVALID_ARGUMENT", "--json");
}

TEST(BadInputTest, UnknownCommand) {
  ExpectOneLineError(Slackswap({"frobnicate"}), "INVALID_ARGUMENT",
                     "frobnicate");
}

TEST(BadInputTest, BadTimelinePoints) {
  for (const std::string points : {"0", "-4", "many"}) {
    SCOPED_TRACE(points);
    ExpectOneLineError(Slackswap({"simulate", "--workload", "gpt2-xl",
                                  "--timeline-points", points}),
                       "INVALID_ARGUMENT", "timeline-points");
  }
}

TEST(BadInputTest, UnknownFileExtension) {
  const std::string path = TempPath("graph.yaml");
  WriteAll(path, "name: x\n");
  ExpectOneLineError(Slackswap({"simulate", "--graph", path}),
                     "INVALID_ARGUMENT", path);
}

TEST(HelpTest, ListsTheCommandsAndTheRegistries) {
  Outcome o = Slackswap({"--help"});
  EXPECT_EQ(o.code, 0) << o;
  for (const char* command : {"simulate", "plan", "fit", "sweep", "table",
                              "workload", "list", "health"}) {
    EXPECT_THAT(o.out, HasSubstr(absl::StrCat("\n  ", command, " "))) << o;
  }
  for (const std::string& name : PolicyNames()) {
    EXPECT_THAT(o.out, HasSubstr(name));
  }
  for (const std::string& name : WorkloadNames()) {
    EXPECT_THAT(o.out, HasSubstr(name));
  }
  for (const std::string& name : HardwareNames()) {
    EXPECT_THAT(o.out, HasSubstr(name));
  }
  EXPECT_EQ(o.err, "");
}

// Help wraps at 80 columns: text with every run of spaces and newlines one
// space, so a phrase is found wherever the lines break.
std::string Unwrapped(const std::string& help) {
  return absl::StrJoin(
      absl::StrSplit(help, absl::ByAnyChar(" \n"), absl::SkipEmpty()), " ");
}

TEST(HelpTest, EachCommandHasItsOwnHelpWithDefaultsAndAnExample) {
  Outcome flag = Slackswap({"plan", "--help"});
  EXPECT_EQ(flag.code, 0) << flag;
  EXPECT_THAT(flag.out, StartsWith("usage: slackswap plan "));
  EXPECT_THAT(flag.out, HasSubstr("--budget B"));
  EXPECT_THAT(Unwrapped(flag.out), HasSubstr("(default: a100-80gb-pcie4)"));
  EXPECT_THAT(
      Unwrapped(flag.out),
      HasSubstr(absl::StrCat(
          "(default: ", absl::StrJoin(DefaultPolicyNames(), ","), ")")));
  EXPECT_THAT(flag.out, HasSubstr("examples:\n  slackswap plan "));
  EXPECT_THAT(flag.out, Not(HasSubstr("--budgets FROM:TO:STEP")));
  Outcome verb = Slackswap({"help", "plan"});
  EXPECT_EQ(verb.code, 0) << verb;
  EXPECT_EQ(verb.out, flag.out);
  Outcome sweep = Slackswap({"sweep", "-h"});
  EXPECT_THAT(Unwrapped(sweep.out), HasSubstr("(default: 0.1:1.0:0.05)"));
  // health waits 5 s for an answer unless told otherwise; other commands
  // set no deadline.
  EXPECT_THAT(Unwrapped(Slackswap({"health", "--help"}).out),
              HasSubstr("deadline of each call to --server (default: 5)"));
  EXPECT_THAT(Unwrapped(flag.out),
              HasSubstr("deadline of each call to --server (default: none)"));
  ExpectOneLineError(Slackswap({"help", "frobnicate"}), "INVALID_ARGUMENT",
                     "help takes one command name");
  // A wrong flag points at the command's help.
  ExpectOneLineError(Slackswap({"plan", "--bugdet", "0.5"}), "INVALID_ARGUMENT",
                     "see slackswap plan --help");
}

TEST(HelpTest, BothBinariesPrintTheSameVersionAndCommit) {
  Outcome cli = Slackswap({"--version"});
  Outcome server = RunBinary(SLACKSWAPD_BIN, {"--version"});
  EXPECT_EQ(cli.code, 0) << cli;
  EXPECT_EQ(server.code, 0) << server;
  EXPECT_EQ(cli.out, VersionLine("slackswap"));
  EXPECT_EQ(server.out, VersionLine("slackswapd"));
  EXPECT_THAT(cli.out, HasSubstr(absl::StrCat(" ", Version(), " (commit ",
                                              Commit(), ")")));
}

TEST(ListTest, ListsEveryPolicyHardwareProfileAndWorkload) {
  Outcome policies = Slackswap({"list", "policies"});
  ASSERT_EQ(policies.code, 0) << policies;
  for (const PolicyInfo& p : PolicyRegistry()) {
    EXPECT_THAT(policies.out, HasSubstr(absl::StrCat(p.name, " ")));
    EXPECT_THAT(policies.out, HasSubstr(p.summary));
  }
  Outcome hardware = Slackswap({"list", "hardware"});
  ASSERT_EQ(hardware.code, 0) << hardware;
  for (const std::string& name : HardwareNames()) {
    EXPECT_THAT(hardware.out, HasSubstr(name));
  }
  Outcome workloads = Slackswap({"list", "workloads", "--json"});
  ASSERT_EQ(workloads.code, 0) << workloads;
  v1::ListWorkloadsResponse parsed;
  ASSERT_TRUE(ParsedJson(workloads.out, &parsed));
  ASSERT_EQ(parsed.workloads_size(), static_cast<int>(WorkloadNames().size()));
  for (int i = 0; i < parsed.workloads_size(); ++i) {
    EXPECT_EQ(parsed.workloads(i).name(), WorkloadNames()[i]);
    EXPECT_GT(parsed.workloads(i).saved_activation_bytes(), 0);
  }
  ExpectOneLineError(Slackswap({"list", "gpus"}), "INVALID_ARGUMENT",
                     "give policies, hardware, nodes or workloads");
  ExpectOneLineError(Slackswap({"list"}), "INVALID_ARGUMENT",
                     "list needs what to list");
}

TEST(ListTest, ListsNodesAsATableAndAsJson) {
  Outcome table = Slackswap({"list", "nodes"});
  ASSERT_EQ(table.code, 0) << table;
  EXPECT_EQ(table.out,
            "dgx-a100-80gb  8x a100-80gb-pcie4   4 switches, 2 sockets, "
            "NVLink 300 GB/s each way, pinned 1 TB, 8 NICs\n"
            "hgx-h100-sxm   8x h100-pcie5        4 switches, 2 sockets, "
            "NVLink 450 GB/s each way, pinned 1 TB, 8 NICs\n"
            "a100-pcie-8x   8x a100-80gb-pcie4   4 switches, 2 sockets, "
            "no NVLink, pinned 500 GB, 0 NICs\n"
            "gh200-4x       4x gh200-c2c         4 switches, 4 sockets, "
            "NVLink 450 GB/s each way, pinned 960 GB, 0 NICs\n");
  Outcome json = Slackswap({"list", "nodes", "--json"});
  ASSERT_EQ(json.code, 0) << json;
  v1::ListNodesResponse parsed;
  ASSERT_TRUE(ParsedJson(json.out, &parsed));
  ASSERT_EQ(parsed.nodes_size(), static_cast<int>(NodeNames().size()));
  for (int i = 0; i < parsed.nodes_size(); ++i) {
    EXPECT_EQ(parsed.nodes(i).name(), NodeNames()[i]);
    EXPECT_GT(parsed.nodes(i).num_gpus(), 0);
  }
}

TEST(BadInputTest, ABareBudgetAboveTenAsksForAUnit) {
  ExpectOneLineError(Slackswap({"plan", "--workload", "gpt2-xl", "--layers",
                                "1", "--budget", "20"}),
                     "INVALID_ARGUMENT",
                     "for bytes give a unit (20GB or 20GiB)");
}

// --- Graph files round-trip -------------------------------------------------

class GraphFileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphFileTest, SimulatingTheWrittenGraphMatchesTheBuiltInWorkload) {
  const std::string path = TempPath("g" + GetParam());
  Outcome w = Slackswap({"workload", "--workload", "gpt2-xl", "--out", path});
  ASSERT_EQ(w.code, 0) << w;
  EXPECT_THAT(w.out, HasSubstr(path));
  EXPECT_EQ(w.err, "");

  v1::SimulationResult built = SimulateJson(
      {"simulate", "--workload", "gpt2-xl", "--hardware", kHardware, "--json"});
  v1::SimulationResult loaded = SimulateJson(
      {"simulate", "--graph", path, "--hardware", kHardware, "--json"});
  EXPECT_GT(built.step_ns(), 0);
  EXPECT_EQ(loaded.step_ns(), built.step_ns());
  EXPECT_EQ(loaded.ideal_step_ns(), built.ideal_step_ns());
  EXPECT_EQ(loaded.peak_activation_bytes(), built.peak_activation_bytes());
  EXPECT_EQ(loaded.peak_transient_bytes(), built.peak_transient_bytes());
  EXPECT_EQ(loaded.static_bytes(), built.static_bytes());
  EXPECT_EQ(loaded.events_processed(), built.events_processed());
}

INSTANTIATE_TEST_SUITE_P(Formats, GraphFileTest,
                         ::testing::Values(".json", ".pb", ".txtpb"),
                         [](const auto& info) { return info.param.substr(1); });

// --- Data parallel (--dp) ---------------------------------------------------

// `workload --dp 8` writes the step with DDP's bucketed all-reduces
// (docs/workloads.md, "Data parallel (DDP)"); plan and simulate take it as
// one rank, where a collective takes no time: the single-GPU step's times
// and memory, whether it comes as a file or as a workload.
TEST(DataParallelTest, PlanAndSimulateTakeTheDdpStepAsOneRank) {
  const std::string path = TempPath("ddp.pb");
  Outcome w = Slackswap({"workload", "--workload", "gpt2-xl", "--layers", "2",
                         "--dp", "8", "--out", path});
  ASSERT_EQ(w.code, 0) << w;
  // The figures docs/workloads.md shows: 58 ops and 4 all-reduces, each
  // after the backward op that completes its bucket, of these bytes.
  EXPECT_EQ(w.out, absl::StrCat("wrote ", path, ": 62 ops, 98 tensors\n"));
  v1::OperatorGraph g;
  ASSERT_TRUE(ReadProtoFile(path, &g).ok());
  std::vector<std::pair<std::string, int64_t>> buckets;
  for (int i = 0; i < g.ops_size(); ++i) {
    const v1::Op& op = g.ops(i);
    if (!op.has_collective()) continue;
    EXPECT_EQ(op.name(), absl::StrCat("ddp.all_reduce.bucket", buckets.size()));
    EXPECT_EQ(op.phase(), v1::PHASE_BACKWARD);
    EXPECT_EQ(op.collective().kind(), v1::COLLECTIVE_KIND_ALL_REDUCE);
    EXPECT_EQ(op.collective().algorithm(), v1::COLLECTIVE_ALGORITHM_RING);
    EXPECT_THAT(op.collective().group(),
                ::testing::ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
    buckets.emplace_back(g.ops(i - 1).name(), op.collective().bytes());
  }
  EXPECT_THAT(
      buckets,
      ::testing::ElementsAre(
          std::pair<std::string, int64_t>{"L1.mlp_up.bwd", 40'966'400},
          std::pair<std::string, int64_t>{"L0.mlp_down.bwd", 40'972'800},
          std::pair<std::string, int64_t>{"L0.qkv_proj.bwd", 40'966'400},
          std::pair<std::string, int64_t>{"embeddings.bwd", 164'105'600}));
  int64_t parameter_bytes = 0;
  for (const v1::Tensor& t : g.tensors()) {
    if (t.kind() == v1::TENSOR_KIND_PARAMETER) {
      parameter_bytes += t.size_bytes();
    }
    // The tied word embeddings, in the last bucket.
    if (t.name() == "embeddings.word") {
      EXPECT_EQ(t.size_bytes(), 160'822'400);
    }
  }
  EXPECT_EQ(parameter_bytes,
            40'966'400 + 40'972'800 + 40'966'400 + 164'105'600);

  const v1::SimulationResult single =
      SimulateJson({"simulate", "--workload", "gpt2-xl", "--layers", "2",
                    "--hardware", kHardware, "--json"});
  for (const std::vector<std::string>& step :
       {std::vector<std::string>{"--graph", path},
        std::vector<std::string>{"--workload", "gpt2-xl", "--layers", "2",
                                 "--dp", "8"}}) {
    SCOPED_TRACE(step[1]);
    std::vector<std::string> args = {"simulate", "--hardware", kHardware,
                                     "--json"};
    args.insert(args.end(), step.begin(), step.end());
    const v1::SimulationResult ddp = SimulateJson(args);
    ASSERT_TRUE(ddp.feasible()) << ddp.infeasible_reason();
    EXPECT_EQ(ddp.step_ns(), single.step_ns());
    EXPECT_EQ(ddp.ideal_step_ns(), single.ideal_step_ns());
    EXPECT_EQ(ddp.peak_activation_bytes(), single.peak_activation_bytes());
    EXPECT_EQ(ddp.static_bytes(), single.static_bytes());

    args[0] = "plan";
    args.insert(args.end(), {"--budget", "0.5", "--policy", "slackswap"});
    Outcome plan = Slackswap(args);
    ASSERT_EQ(plan.code, 0) << plan;
    v1::PlanReport report;
    ASSERT_TRUE(ParsedJson(plan.out, &report));
    ASSERT_EQ(report.results_size(), 1);
    EXPECT_TRUE(report.results(0).result().feasible());
    EXPECT_GE(report.results(0).result().step_ns(), single.ideal_step_ns());
  }
}

// docs/workloads.md's all-reduce written into an exported graph is an op
// the converter takes.
TEST(DataParallelTest, TheDocsHandWrittenAllReduceIsAValidOp) {
  const std::string doc = testutil::SourceFile("docs/workloads.md");
  const size_t begin = doc.find("{\"id\": \"900\"");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = doc.find("}}", begin);
  ASSERT_NE(end, std::string::npos);
  v1::Op op;
  ASSERT_TRUE(ParsedJson(doc.substr(begin, end + 2 - begin), &op));
  EXPECT_EQ(op.collective().bytes(), 25 << 20);  // one bucket's cap
  // After the backward op of a one-op step (reading nothing).
  v1::OperatorGraph g;
  g.set_name("hand");
  v1::Tensor* x = g.add_tensors();
  x->set_id(1);
  x->set_size_bytes(64);
  v1::Op* f = g.add_ops();
  f->set_id(1);
  f->set_phase(v1::PHASE_FORWARD);
  f->add_output_ids(1);
  v1::Op* b = g.add_ops();
  b->set_id(2);
  b->set_phase(v1::PHASE_BACKWARD);
  b->add_input_ids(1);
  *g.add_ops() = op;
  const std::string path = TempPath("hand.json");
  ASSERT_TRUE(WriteProtoFile(path, g).ok());
  const v1::SimulationResult r =
      SimulateJson({"simulate", "--graph", path, "--json"});
  EXPECT_TRUE(r.feasible());
}

TEST(DataParallelTest, BadRankCountsAreRefusedNamingTheFlag) {
  const std::string path = TempPath("ddp_bad.json");
  for (const char* bad : {"0", "65", "-1", "4294967298"}) {
    ExpectOneLineError(
        Slackswap(
            {"workload", "--workload", "gpt2-xl", "--dp", bad, "--out", path}),
        "INVALID_ARGUMENT",
        absl::StrCat("--dp must be in [1, 64] ranks, got ", bad));
  }
  ExpectOneLineError(Slackswap({"simulate", "--graph", path, "--dp", "2"}),
                     "INVALID_ARGUMENT",
                     "--dp applies to --workload, not --graph");
}

// The FSDP step (docs/workloads.md, "Fully sharded data parallel (FSDP)"):
// the figures the doc shows, and a plan for it.
TEST(FullyShardedTest, WorkloadHasTheDocsCollectivesAndPlans) {
  const std::string path = TempPath("fsdp.pb");
  Outcome w = Slackswap({"workload", "--workload", "gpt2-xl", "--layers", "2",
                         "--fsdp", "8", "--out", path});
  ASSERT_EQ(w.code, 0) << w;
  EXPECT_EQ(w.out, absl::StrCat("wrote ", path, ": 67 ops, 104 tensors\n"));
  v1::OperatorGraph g;
  ASSERT_TRUE(ReadProtoFile(path, &g).ok());
  // (collective, the op after a gather or before a reduce-scatter, bytes)
  std::vector<std::tuple<std::string, std::string, int64_t>> collectives;
  for (int i = 0; i < g.ops_size(); ++i) {
    const v1::Op& op = g.ops(i);
    if (!op.has_collective()) continue;
    EXPECT_EQ(op.collective().algorithm(), v1::COLLECTIVE_ALGORITHM_RING);
    EXPECT_THAT(op.collective().group(),
                ::testing::ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
    const bool gather =
        op.collective().kind() == v1::COLLECTIVE_KIND_ALL_GATHER;
    collectives.emplace_back(op.name(), g.ops(gather ? i + 1 : i - 1).name(),
                             op.collective().bytes());
  }
  using C = std::tuple<std::string, std::string, int64_t>;
  EXPECT_THAT(
      collectives,
      ::testing::ElementsAre(
          C{"fsdp.all_gather.root.fwd", "embeddings", 164'105'600},
          C{"fsdp.all_gather.L0.fwd", "L0.ln_1", 61'452'800},
          C{"fsdp.all_gather.L1.fwd", "L1.ln_1", 61'452'800},
          C{"fsdp.all_gather.root.bwd", "cross_entropy.bwd", 164'105'600},
          C{"fsdp.all_gather.L1.bwd", "L1.mlp_residual_add.bwd", 61'452'800},
          C{"fsdp.reduce_scatter.L1", "L1.ln_1.bwd", 61'452'800},
          C{"fsdp.all_gather.L0.bwd", "L0.mlp_residual_add.bwd", 61'452'800},
          C{"fsdp.reduce_scatter.L0", "L0.ln_1.bwd", 61'452'800},
          C{"fsdp.reduce_scatter.root", "embeddings.bwd", 164'105'600}));
  int64_t shards = 0, largest_gathered = 0;
  for (const v1::Tensor& t : g.tensors()) {
    if (t.kind() != v1::TENSOR_KIND_PARAMETER) continue;
    if (absl::StartsWith(t.name(), "fsdp.")) {
      largest_gathered = std::max(largest_gathered, t.size_bytes());
    } else {
      shards += t.size_bytes();
    }
    if (t.name() == "embeddings.word") {
      EXPECT_EQ(t.size_bytes(), 160'822'400 / 8);
    }
  }
  // The model's 287,011,200 parameter bytes over 8 ranks.
  EXPECT_EQ(shards, 35'876'400);
  EXPECT_EQ(largest_gathered, 164'105'600);

  for (const std::vector<std::string>& step :
       {std::vector<std::string>{"--graph", path},
        std::vector<std::string>{"--workload", "gpt2-xl", "--layers", "2",
                                 "--fsdp", "8"}}) {
    SCOPED_TRACE(step[1]);
    std::vector<std::string> args = {"plan",     "--hardware", kHardware,
                                     "--json",   "--budget",   "0.5",
                                     "--policy", "slackswap"};
    args.insert(args.end(), step.begin(), step.end());
    Outcome plan = Slackswap(args);
    ASSERT_EQ(plan.code, 0) << plan;
    v1::PlanReport report;
    ASSERT_TRUE(ParsedJson(plan.out, &report));
    ASSERT_EQ(report.results_size(), 1);
    EXPECT_TRUE(report.results(0).result().feasible());
    EXPECT_GT(report.results(0).result().step_ns(), 0);
  }
  // The command the brief names, as text.
  Outcome text =
      Slackswap({"plan", "--workload", "gpt2-xl", "--layers", "2", "--fsdp",
                 "8", "--policy", "slackswap", "--budget", "0.5"});
  ASSERT_EQ(text.code, 0) << text;
  EXPECT_THAT(text.out, HasSubstr("slackswap"));
}

TEST(FullyShardedTest, BadRanksHybridAndGraphAreRefused) {
  const std::string path = TempPath("fsdp_bad.json");
  for (const char* bad : {"0", "65", "-1", "4294967298"}) {
    ExpectOneLineError(
        Slackswap({"workload", "--workload", "gpt2-xl", "--fsdp", bad, "--out",
                   path}),
        "INVALID_ARGUMENT",
        absl::StrCat("--fsdp must be in [1, 64] ranks, got ", bad));
  }
  ExpectOneLineError(Slackswap({"workload", "--workload", "gpt2-xl", "--dp",
                                "2", "--fsdp", "4", "--out", path}),
                     "INVALID_ARGUMENT", "--dp and --fsdp cannot both be > 1");
  ExpectOneLineError(Slackswap({"simulate", "--graph", path, "--fsdp", "2"}),
                     "INVALID_ARGUMENT",
                     "--fsdp applies to --workload, not --graph");
  Outcome bert = Slackswap({"workload", "--workload", "bert-large", "--layers",
                            "2", "--fsdp", "8", "--out", path});
  EXPECT_NE(bert.code, 0);
  EXPECT_THAT(bert.err, HasSubstr("fully_sharded"));
}

// docs/workloads.md, "Tensor parallel (Megatron-LM)": rank 1's collectives
// of a one-layer Llama in tensor parallel over 2 times data parallel over
// 4, and the whole step in three layouts on the DGX.
TEST(TensorParallelTest, WorkloadAndNodeStepsAreTheDocs) {
  const std::string path = TempPath("tp.json");
  Outcome w =
      Slackswap({"workload", "--workload", "llama-7b", "--layers", "1", "--tp",
                 "2", "--dp", "4", "--rank", "1", "--out", path});
  ASSERT_EQ(w.code, 0) << w;
  EXPECT_EQ(w.out, absl::StrCat("wrote ", path, ": 44 ops, 63 tensors\n"));
  v1::OperatorGraph g;
  ASSERT_TRUE(ReadProtoFile(path, &g).ok());
  // (collective, the op before it, bytes, group)
  using C = std::tuple<std::string, std::string, int64_t, std::string>;
  std::vector<C> collectives;
  for (int i = 1; i < g.ops_size(); ++i) {
    const v1::Op& op = g.ops(i);
    if (!op.has_collective()) continue;
    EXPECT_EQ(op.collective().kind(), v1::COLLECTIVE_KIND_ALL_REDUCE);
    EXPECT_EQ(op.collective().algorithm(), v1::COLLECTIVE_ALGORITHM_RING);
    collectives.emplace_back(op.name(), g.ops(i - 1).name(),
                             op.collective().bytes(),
                             absl::StrJoin(op.collective().group(), ", "));
  }
  const std::string tp = "0, 1", dp = "1, 3, 5, 7";
  EXPECT_THAT(
      collectives,
      ::testing::ElementsAre(
          C{"tp.all_reduce.embeddings", "embeddings", 67'108'864, tp},
          C{"tp.all_reduce.L0.o_proj", "L0.o_proj", 67'108'864, tp},
          C{"tp.all_reduce.L0.down_proj", "L0.down_proj", 67'108'864, tp},
          C{"tp.all_reduce.cross_entropy.stats", "lm_head", 98'304, tp},
          C{"tp.all_reduce.lm_head.bwd", "lm_head.bwd", 67'108'864, tp},
          C{"ddp.all_reduce.bucket0", "tp.all_reduce.lm_head.bwd", 131'072'000,
            dp},
          C{"ddp.all_reduce.bucket1", "L0.down_proj.bwd", 45'096'960, dp},
          C{"tp.all_reduce.L0.gate_up_proj.bwd", "L0.gate_up_proj.bwd",
            67'108'864, tp},
          C{"ddp.all_reduce.bucket2", "tp.all_reduce.L0.gate_up_proj.bwd",
            90'177'536, dp},
          C{"tp.all_reduce.L0.qkv_proj.bwd", "L0.qkv_proj.bwd", 67'108'864, tp},
          C{"ddp.all_reduce.bucket3", "tp.all_reduce.L0.qkv_proj.bwd",
            67'117'056, dp},
          C{"ddp.all_reduce.bucket4", "embeddings.bwd", 131'080'192, dp}));

  struct Layout {
    std::vector<std::string> flags;
    std::string step, ideal, retained;
  };
  for (const Layout& layout :
       {Layout{{"--dp", "8"}, "1384.350 ms", "1382.323 ms", "99.85%"},
        Layout{
            {"--tp", "2", "--dp", "4"}, "738.746 ms", "706.827 ms", "95.68%"},
        Layout{{"--tp", "8"}, "261.830 ms", "203.602 ms", "77.76%"}}) {
    std::vector<std::string> args = {"simulate", "--node", "dgx-a100-80gb",
                                     "--workload", "llama-7b"};
    args.insert(args.end(), layout.flags.begin(), layout.flags.end());
    SCOPED_TRACE(absl::StrJoin(args, " "));
    Outcome sim = Slackswap(args);
    ASSERT_EQ(sim.code, 0) << sim;
    EXPECT_THAT(sim.out,
                HasSubstr(absl::StrCat("node dgx-a100-80gb, 8 ranks\n  step ",
                                       layout.step, " (ideal ", layout.ideal,
                                       "), ", layout.retained, " of ideal")));
  }
}

// docs/PLANNERS.md, "Plans for a node": plan --node judges every policy on
// the node, planned for each rank's share of the shared links, and draws
// the node (a panel per rank and per shared link).
TEST(NodePlanTest, PlanTakesANodeAndDrawsIt) {
  const std::string svg = TempPath("node_plan.svg");
  Outcome o = Slackswap({"plan", "--workload", "gpt2-xl", "--layers", "4",
                         "--dp", "8", "--node", "dgx-a100-80gb", "--budget",
                         "0.5", "--policy", "slackswap", "--svg", svg});
  ASSERT_EQ(o.code, 0) << o;
  EXPECT_THAT(o.out,
              HasSubstr("on node dgx-a100-80gb, 8 ranks: each rank's plan "
                        "counts on 12.50 GB/s H2D and 12.75 GB/s D2H (its "
                        "share of the shared links)"));
  const std::string picture = ReadAll(svg);
  for (int r = 0; r < 8; ++r) {
    EXPECT_THAT(picture, HasSubstr(absl::StrCat("id=\"r", r, "-memory\"")));
  }
  // The all-reduces load the NVLink ports, which carry no host copy.
  EXPECT_THAT(picture, HasSubstr("shared links: bytes per second"));
  EXPECT_THAT(picture, HasSubstr(" NVLink: toward the GPUs "));
  ExpectOneLineError(Slackswap({"plan", "--workload", "gpt2-xl", "--budget",
                                "0.5", "--ranks", "4"}),
                     "INVALID_ARGUMENT", "--ranks is for --node");
}

// sweep --node: every budget's plans are plan --node's, judged on the
// node; the table says so, and that the node has no bound.
TEST(NodePlanTest, SweepTakesANodeAsPlanDoes) {
  const std::vector<std::string> step = {"--workload", "gpt2-xl",
                                         "--layers",   "2",
                                         "--node",     "dgx-a100-80gb",
                                         "--ranks",    "2",
                                         "--policy",   "swap_only,slackswap"};
  std::vector<std::string> args = {"sweep", "--budgets", "0.5:0.5:0.1",
                                   "--include-bound"};
  args.insert(args.end(), step.begin(), step.end());
  Outcome table = Slackswap(args);
  ASSERT_EQ(table.code, 0) << table;
  const Node dgx = *FindNode("dgx-a100-80gb");
  const Hardware share = FairShareGpu(dgx, 2);
  EXPECT_THAT(table.out, HasSubstr(absl::StrCat("gpt2-xl on ", dgx.gpu.name,
                                                ": retained throughput")));
  EXPECT_THAT(table.out,
              HasSubstr(absl::StrFormat(
                  "on node dgx-a100-80gb, 2 ranks: each rank's plan counts on "
                  "%.2f GB/s H2D and %.2f GB/s D2H (its share of the shared "
                  "links); every point is the whole node simulated",
                  share.h2d_gbps, share.d2h_gbps)));
  EXPECT_THAT(table.out, HasSubstr("bound unavailable: the bound's model has "
                                   "one GPU's host link"));

  args.push_back("--json");
  Outcome json = Slackswap(args);
  ASSERT_EQ(json.code, 0) << json;
  v1::SweepReport sweep;
  ASSERT_TRUE(ParsedJson(json.out, &sweep));
  EXPECT_EQ(sweep.node_name(), "dgx-a100-80gb");
  EXPECT_EQ(sweep.ranks(), 2);
  EXPECT_EQ(sweep.planned_h2d_gbps(), share.h2d_gbps);
  std::vector<std::string> plan_args = {"plan", "--budget", "0.5", "--json"};
  plan_args.insert(plan_args.end(), step.begin(), step.end());
  Outcome plan = Slackswap(plan_args);
  ASSERT_EQ(plan.code, 0) << plan;
  v1::PlanReport report;
  ASSERT_TRUE(ParsedJson(plan.out, &report));
  ASSERT_EQ(sweep.points_size(), 2);
  ASSERT_EQ(report.results_size(), 2);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(report.results(i).policy());
    EXPECT_EQ(sweep.points(i).policy(), report.results(i).policy());
    EXPECT_EQ(sweep.points(i).throughput_retained(),
              report.results(i).result().throughput_retained());
    EXPECT_EQ(sweep.points(i).peak_activation_bytes(),
              report.results(i).result().peak_activation_bytes());
  }
  ExpectOneLineError(
      Slackswap({"sweep", "--workload", "gpt2-xl", "--ranks", "2"}),
      "INVALID_ARGUMENT", "--ranks is for --node");
}

TEST(TensorParallelTest, LayoutsThatDoNotSplitAreRefused) {
  const std::string path = TempPath("tp_bad.json");
  for (const char* bad : {"0", "65", "-1", "4294967298"}) {
    ExpectOneLineError(
        Slackswap(
            {"workload", "--workload", "llama-7b", "--tp", bad, "--out", path}),
        "INVALID_ARGUMENT",
        absl::StrCat("--tp must be in [1, 64] ranks, got ", bad));
  }
  Outcome heads = Slackswap(
      {"workload", "--workload", "gpt2-xl", "--tp", "2", "--out", path});
  EXPECT_NE(heads.code, 0);
  EXPECT_THAT(heads.err,
              HasSubstr("tensor_parallel (2) must divide heads (25)"));
  Outcome rank = Slackswap({"workload", "--workload", "llama-7b", "--tp", "2",
                            "--dp", "4", "--rank", "8", "--out", path});
  EXPECT_NE(rank.code, 0);
  EXPECT_THAT(rank.err, HasSubstr("rank must be in [0, 8)"));
  ExpectOneLineError(Slackswap({"simulate", "--graph", path, "--tp", "2"}),
                     "INVALID_ARGUMENT",
                     "--tp applies to --workload, not --graph");
}

// --- Outputs ----------------------------------------------------------------

TEST(OutputTest, PlanAndSimulateDrawAnSvg) {
  const std::string plan_svg = TempPath("plan.svg");
  Outcome p =
      Slackswap({"plan", "--workload", "gpt2-xl", "--layers", "2", "--budget",
                 "0.5", "--policy", "swap_only,slackswap", "--svg", plan_svg});
  ASSERT_EQ(p.code, 0) << p;
  EXPECT_THAT(p.out, HasSubstr("slackswap"));  // the table is still printed
  const std::string plan_picture = ReadAll(plan_svg);
  EXPECT_THAT(plan_picture, HasSubstr("<?xml version=\"1.0\""));
  EXPECT_THAT(plan_picture, HasSubstr("id=\"r0-memory-budget\""));
  EXPECT_THAT(plan_picture, HasSubstr("id=\"r0-lane-h2d\""));
  EXPECT_THAT(plan_picture, Not(HasSubstr("<script")));
  const std::string sim_svg = TempPath("simulate.svg");
  Outcome s = Slackswap(
      {"simulate", "--workload", "gpt2-xl", "--layers", "2", "--svg", sim_svg});
  ASSERT_EQ(s.code, 0) << s;
  EXPECT_THAT(ReadAll(sim_svg),
              HasSubstr("<title>gpt2-xl on a100-80gb-pcie4</title>"));
  EXPECT_THAT(ReadAll(sim_svg), Not(HasSubstr("id=\"r0-memory-budget\"")));
}

TEST(OutputTest, TraceIsJsonWithTraceEvents) {
  const std::string trace = TempPath("t.json");
  Outcome o = Slackswap(
      {"simulate", "--workload", "gpt2-xl", "--layers", "2", "--trace", trace});
  ASSERT_EQ(o.code, 0) << o;
  EXPECT_THAT(o.out, HasSubstr("step"));  // the summary is still printed
  Struct parsed;
  ASSERT_TRUE(ParsedJson(ReadAll(trace), &parsed));
  auto it = parsed.fields().find("traceEvents");
  ASSERT_NE(it, parsed.fields().end());
  ASSERT_TRUE(it->second.has_list_value());
  // At least one complete event per op of the step.
  int complete = 0;
  for (const Value& e : it->second.list_value().values()) {
    auto ph = e.struct_value().fields().find("ph");
    if (ph != e.struct_value().fields().end() &&
        ph->second.string_value() == "X") {
      ++complete;
    }
  }
  EXPECT_GE(complete, 58);  // 58 ops in gpt2-xl with 2 layers
}

TEST(OutputTest, TimelinePointsBoundsTheTimeline) {
  v1::SimulationResult full =
      SimulateJson({"simulate", "--workload", "gpt2-xl", "--json"});
  ASSERT_GT(full.memory_timeline_size(), 50);
  v1::SimulationResult r = SimulateJson({"simulate", "--workload", "gpt2-xl",
                                         "--json", "--timeline-points", "50"});
  EXPECT_GT(r.memory_timeline_size(), 0);
  EXPECT_LE(r.memory_timeline_size(), 50);
  // Downsampling keeps each bucket's maximum, so the peak survives.
  int64_t peak = 0;
  for (const v1::MemoryPoint& p : r.memory_timeline()) {
    peak = std::max(peak, p.activation_bytes());
  }
  EXPECT_EQ(peak, r.peak_activation_bytes());
  EXPECT_EQ(r.step_ns(), full.step_ns());
  // The full timeline reaches the peak at peak_activation_ns, not before.
  int64_t first_at_peak = -1;
  for (const v1::MemoryPoint& p : full.memory_timeline()) {
    if (p.activation_bytes() == full.peak_activation_bytes()) {
      first_at_peak = p.time_ns();
      break;
    }
  }
  EXPECT_EQ(first_at_peak, full.peak_activation_ns());
}

TEST(OutputTest, SameCommandSameBytes) {
  const std::vector<std::string> args = {"simulate",   "--workload", "llama-7b",
                                         "--hardware", kHardware,    "--json"};
  Outcome a = Slackswap(args);
  Outcome b = Slackswap(args);
  ASSERT_EQ(a.code, 0) << a;
  ASSERT_EQ(b.code, 0) << b;
  EXPECT_FALSE(a.out.empty());
  EXPECT_TRUE(a.out == b.out) << "two runs of the same command differ";
}

// --- Plans ------------------------------------------------------------------

struct SmallWorkload {
  std::map<std::string, int64_t> tensor_id;
  std::map<std::string, int64_t> tensor_bytes;
  std::map<std::string, int64_t> op_id;
};

// Writes gpt2-xl with 2 layers to JSON and reads its ids by name.
SmallWorkload ReadSmallWorkload() {
  SmallWorkload w;
  const std::string path = TempPath("small.json");
  Outcome o = Slackswap(
      {"workload", "--workload", "gpt2-xl", "--layers", "2", "--out", path});
  EXPECT_EQ(o.code, 0) << o;
  v1::OperatorGraph g;
  EXPECT_TRUE(ParsedJson(ReadAll(path), &g));
  for (const v1::Tensor& t : g.tensors()) {
    w.tensor_id[t.name()] = t.id();
    w.tensor_bytes[t.name()] = t.size_bytes();
  }
  for (const v1::Op& op : g.ops()) w.op_id[op.name()] = op.id();
  return w;
}

// docs/PLANNERS.md's reference table is `slackswap table`, figure for
// figure: the budget and every percentage of each model's row, in order.
TEST(GoldenTest, TheTableIsWhatPlannersDocSays) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  Outcome table = Slackswap({"table"});
  ASSERT_EQ(table.code, 0) << table;
  const std::vector<std::vector<std::string>> doc =
      testutil::MarkdownTable(testutil::SourceFile("docs/PLANNERS.md"),
                              "| model | budget | ideal | recompute_only |");
  ASSERT_EQ(doc.size(), WorkloadNames().size());
  for (const std::vector<std::string>& row : doc) {
    SCOPED_TRACE(row[0]);
    std::string line;
    for (absl::string_view l : absl::StrSplit(table.out, '\n')) {
      if (absl::StartsWith(l, row[0] + " ")) line = std::string(l);
    }
    ASSERT_FALSE(line.empty()) << table.out;
    // The command's row, as the doc's cells: model, "7.05 GB", the rest.
    std::vector<std::string> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_GE(words.size(), 3u);
    std::vector<std::string> cells = {words[0], words[1] + " " + words[2]};
    cells.insert(cells.end(), words.begin() + 3, words.end());
    EXPECT_EQ(cells, row);
  }
}

TEST(PlanTest, HandWrittenSwapPlanMovesBytes) {
  SmallWorkload w = ReadSmallWorkload();
  // L0.g (the GELU output) is read by L0.mlp_down in forward and by
  // L0.mlp_down.bwd late in backward; prefetch it when backward begins.
  ASSERT_TRUE(w.tensor_id.count("L0.g"));
  ASSERT_TRUE(w.op_id.count("cross_entropy.bwd"));
  const std::string plan = TempPath("plan.txtpb");
  WriteAll(plan, absl::StrCat(
                     "policy: \"hand-written\"\n", "decisions {\n",
                     "  tensor_id: ", w.tensor_id["L0.g"], "\n",
                     "  action: ACTION_SWAP\n",
                     "  prefetch_after_op_id: ", w.op_id["cross_entropy.bwd"],
                     "\n", "  reason: \"swap one GELU output\"\n", "}\n"));
  const std::vector<std::string> base = {"simulate", "--workload", "gpt2-xl",
                                         "--layers", "2",          "--hardware",
                                         kHardware,  "--json"};
  v1::SimulationResult keep = SimulateJson(base);
  std::vector<std::string> with_plan = base;
  with_plan.insert(with_plan.end(), {"--plan", plan});
  v1::SimulationResult swap = SimulateJson(with_plan);

  EXPECT_EQ(keep.d2h_bytes(), 0);
  ASSERT_TRUE(swap.feasible()) << swap.infeasible_reason();
  EXPECT_EQ(swap.swapped_tensors(), 1);
  EXPECT_EQ(swap.d2h_bytes(), w.tensor_bytes["L0.g"]);
  EXPECT_EQ(swap.h2d_bytes(), w.tensor_bytes["L0.g"]);
  EXPECT_EQ(swap.ideal_step_ns(), keep.ideal_step_ns());
  EXPECT_LE(swap.peak_activation_bytes(), keep.peak_activation_bytes());
  EXPECT_GE(swap.step_ns(), keep.step_ns());
}

TEST(PlanTest, PrefetchBeforeTheLastForwardUseIsRejected) {
  SmallWorkload w = ReadSmallWorkload();
  const std::string plan = TempPath("bad_plan.txtpb");
  // L0.g's last forward reader is L0.mlp_down; L0.gelu comes before it.
  WriteAll(plan, absl::StrCat("decisions { tensor_id: ", w.tensor_id["L0.g"],
                              " action: ACTION_SWAP prefetch_after_op_id: ",
                              w.op_id["L0.gelu"], " }\n"));
  ExpectOneLineError(Slackswap({"simulate", "--workload", "gpt2-xl", "--layers",
                                "2", "--plan", plan}),
                     "INVALID_ARGUMENT", "prefetch_after_op");
}

// The CLI's local entry point with a 1,000,000-op chain whose every link is
// recomputed: rebuilding the last link walks the whole chain (a walk that
// once overflowed the stack). It answers.
TEST(HostileTest, AMillionOpChainRecomputedWholeSimulatesLocally) {
  const v1::OperatorGraph g = testutil::ChainGraph(500'000);
  const std::string graph = TempPath("chain.pb");
  const std::string plan = TempPath("chain_plan.pb");
  ASSERT_TRUE(WriteProtoFile(graph, g).ok());
  ASSERT_TRUE(WriteProtoFile(plan, testutil::RecomputeEverything(g)).ok());
  Outcome o = Slackswap({"simulate", "--graph", graph, "--plan", plan});
  ASSERT_TRUE(o.exited) << o;
  EXPECT_EQ(o.code, 0) << o;
  EXPECT_THAT(o.out, HasSubstr("recomputed        500000 tensors"));
}

// --- Will it fit? -----------------------------------------------------------

// README.md's "Will it fit?" table, answer for answer: each row's command
// run as written (paths under tests/ from the source tree), its "device:"
// line (plan) or its ranking (fit) as the row's answer.
TEST(GoldenTest, TheWillItFitCasesAreWhatTheReadmeSays) {
  const std::vector<std::vector<std::string>> rows = testutil::MarkdownTable(
      testutil::SourceFile("README.md"), "| case | command | answer |");
  ASSERT_EQ(rows.size(), 4u);
  for (const std::vector<std::string>& row : rows) {
    SCOPED_TRACE(row[0]);
    ASSERT_EQ(row.size(), 3u);
    std::string command = row[1];
    ASSERT_TRUE(absl::StartsWith(command, "`slackswap ")) << command;
    command = command.substr(11, command.size() - 12);
    std::vector<std::string> args = absl::StrSplit(command, ' ');
    for (std::string& a : args) {
      if (absl::StartsWith(a, "tests/")) {
        a = absl::StrCat(SLACKSWAP_SOURCE_DIR, "/", a);
      }
    }
    Outcome o = Slackswap(args);
    ASSERT_EQ(o.code, 0) << o;
    std::string answer;
    if (args[0] == "plan") {
      for (absl::string_view l : absl::StrSplit(o.out, '\n')) {
        if (absl::StartsWith(l, "  device: "))
          answer = std::string(l.substr(10));
      }
    } else {
      // The fit table's hardware column, in rank order.
      std::vector<std::string> ranked;
      for (absl::string_view l : absl::StrSplit(o.out, '\n')) {
        std::vector<std::string> words =
            absl::StrSplit(l, ' ', absl::SkipEmpty());
        if (words.size() > 2 &&
            std::all_of(words[0].begin(), words[0].end(), ::isdigit)) {
          ranked.push_back(words[1]);
        }
      }
      answer = absl::StrJoin(ranked, ", ");
    }
    EXPECT_EQ(answer, row[2]) << o.out;
  }
}

// README.md's first example, line for line.
TEST(GoldenTest, TheReadmeSimulateExampleIsWhatTheCommandPrints) {
  const std::string readme = testutil::SourceFile("README.md");
  const std::string start = "$ slackswap simulate --workload gpt2-xl\n";
  const size_t at = readme.find(start);
  ASSERT_NE(at, std::string::npos);
  const size_t end = readme.find("\n\n", at);
  const std::string example =
      readme.substr(at + start.size(), end - at - start.size() + 1);
  Outcome o = Slackswap({"simulate", "--workload", "gpt2-xl"});
  ASSERT_EQ(o.code, 0) << o;
  EXPECT_EQ(o.out, example);
}

TEST(DeviceTest, SimulateSaysWhetherTheStepFitsTheDevice) {
  v1::SimulationResult forty =
      SimulateJson({"simulate", "--workload", "llama-7b", "--hardware",
                    "a100-40gb-pcie4", "--json"});
  EXPECT_TRUE(forty.feasible());
  ASSERT_TRUE(forty.has_device());
  EXPECT_FALSE(forty.device().fits_device());
  EXPECT_EQ(forty.device().capacity_bytes(), 40'000'000'000);
  EXPECT_GT(forty.device().peak_reserved_bytes(),
            forty.static_bytes() + forty.peak_activation_bytes());
  EXPECT_GE(forty.device().peak_reserved_bytes(),
            forty.device().peak_allocated_bytes());
  // The timeline carries the allocator's counters.
  int64_t reserved = 0;
  for (const v1::MemoryPoint& p : forty.memory_timeline()) {
    reserved = std::max(reserved, p.reserved_bytes());
  }
  EXPECT_GT(reserved, 0);
  EXPECT_LE(reserved, forty.device().peak_reserved_bytes());
  v1::SimulationResult expandable =
      SimulateJson({"simulate", "--workload", "llama-7b", "--hardware",
                    "a100-80gb-pcie4", "--json", "--expandable-segments"});
  EXPECT_TRUE(expandable.device().expandable_segments());
  EXPECT_TRUE(expandable.device().fits_device());
  // The trace has the allocator's counter track.
  const std::string trace = TempPath("device.json");
  Outcome t = Slackswap(
      {"simulate", "--workload", "gpt2-xl", "--layers", "2", "--trace", trace});
  ASSERT_EQ(t.code, 0) << t;
  EXPECT_THAT(ReadAll(trace), HasSubstr("\"name\":\"allocator\""));
  EXPECT_THAT(ReadAll(trace), HasSubstr("\"reserved_bytes\":"));
  EXPECT_THAT(t.out, HasSubstr("  allocator         allocated "));
}

TEST(DeviceTest, ABudgetNothingMeetsStillPrintsJson) {
  Outcome o = Slackswap({"plan", "--workload", "gpt2-xl", "--layers", "1",
                         "--budget", "1KB", "--policy", "slackswap", "--json"});
  ASSERT_EQ(o.code, 0) << o;
  v1::PlanReport report;
  ASSERT_TRUE(ParsedJson(o.out, &report));
  EXPECT_THAT(report.budget_unmet(), HasSubstr("cannot be met"));
  ASSERT_EQ(report.results_size(), 1);
  EXPECT_FALSE(report.results(0).result().feasible());
  EXPECT_GT(report.results(0).min_budget_bytes(), 1000);
  Outcome text = Slackswap({"plan", "--workload", "gpt2-xl", "--layers", "1",
                            "--budget", "1KB", "--policy", "slackswap"});
  ASSERT_EQ(text.code, 0) << text;
  EXPECT_THAT(text.out, HasSubstr("budget not met: "));
  EXPECT_THAT(text.out, HasSubstr("its plans are feasible from"));
}

TEST(DeviceTest, TheDeviceBudgetFlag) {
  Outcome o = Slackswap({"plan", "--workload", "llama-7b", "--hardware",
                         "a100-40gb-pcie4", "--budget", "device:4GB",
                         "--policy", "slackswap", "--json"});
  ASSERT_EQ(o.code, 0) << o;
  v1::PlanReport report;
  ASSERT_TRUE(ParsedJson(o.out, &report));
  EXPECT_TRUE(report.budget_device());
  EXPECT_EQ(report.device().headroom_bytes(), 4'000'000'000);
  EXPECT_TRUE(report.device().fits_device());
  const v1::DeviceMemory& d = report.results(0).result().device();
  EXPECT_LE(d.required_bytes(), d.capacity_bytes());
  EXPECT_EQ(
      d.required_bytes(),
      d.peak_reserved_bytes() + d.framework_reserve_bytes() + 4'000'000'000);
  for (const char* bad : {"device:", "device:0.5", "device:-1GB", "devices"}) {
    SCOPED_TRACE(bad);
    ExpectOneLineError(
        Slackswap({"plan", "--workload", "gpt2-xl", "--budget", bad}),
        "INVALID_ARGUMENT", "device");
  }
  ExpectOneLineError(
      Slackswap({"simulate", "--workload", "gpt2-xl", "--budget", "device"}),
      "INVALID_ARGUMENT", "--budget device is for plan");
  Outcome help = Slackswap({"plan", "--help"});
  EXPECT_THAT(Unwrapped(help.out), HasSubstr("or device[:HEADROOM]"));
  EXPECT_THAT(help.out, HasSubstr("--budget-all-memory"));
  EXPECT_THAT(help.out, HasSubstr("--expandable-segments"));
}

TEST(FitTest, RanksTheGivenProfilesAsJsonToo) {
  Outcome o =
      Slackswap({"fit", "--workload", "llama-7b", "--hardware",
                 "a100-40gb-pcie4,a100-80gb-pcie4,h100-pcie5", "--json"});
  ASSERT_EQ(o.code, 0) << o;
  v1::FitResponse resp;
  ASSERT_TRUE(ParsedJson(o.out, &resp));
  ASSERT_EQ(resp.results_size(), 3);
  EXPECT_EQ(resp.results(0).hardware_name(), "h100-pcie5");
  EXPECT_EQ(resp.results(1).hardware_name(), "a100-80gb-pcie4");
  EXPECT_EQ(resp.results(2).hardware_name(), "a100-40gb-pcie4");
  EXPECT_FALSE(resp.results(2).fits_without_plan());
  EXPECT_TRUE(resp.results(2).fits_device());
  Outcome priced =
      Slackswap({"fit", "--workload", "llama-7b", "--hardware",
                 "a100-40gb-pcie4,h100-pcie5", "--prices", "1,100"});
  ASSERT_EQ(priced.code, 0) << priced;
  EXPECT_THAT(priced.out, HasSubstr("ranked by the cost of 1,000 steps"));
  EXPECT_THAT(priced.out, HasSubstr("per 1k steps"));
  ExpectOneLineError(Slackswap({"fit", "--workload", "llama-7b", "--hardware",
                                "h100-pcie5", "--prices", "1,2"}),
                     "INVALID_ARGUMENT", "--prices gives 2 prices for 1");
  ExpectOneLineError(Slackswap({"fit", "--workload", "llama-7b", "--hardware",
                                "h100-pcie5", "--prices", "-1"}),
                     "INVALID_ARGUMENT", "price_per_hour");
  ExpectOneLineError(
      Slackswap({"fit", "--workload", "llama-7b", "--headroom", "0.5"}),
      "INVALID_ARGUMENT", "--headroom takes bytes");
  ExpectOneLineError(
      Slackswap({"fit", "--workload", "llama-7b", "--target", "2"}),
      "INVALID_ARGUMENT", "target must be in (0, 1]");
  Outcome help = Slackswap({"fit", "--help"});
  EXPECT_THAT(help.out, StartsWith("usage: slackswap fit "));
  EXPECT_THAT(Unwrapped(help.out),
              HasSubstr("(default: every catalog profile)"));
  EXPECT_THAT(help.out, HasSubstr("examples:\n  slackswap fit "));
}

// README.md's job example (Fit on every catalog node), line for line.
TEST(GoldenTest, TheReadmeJobFitIsWhatTheCommandPrints) {
  const std::string readme = testutil::SourceFile("README.md");
  const std::string start =
      "$ slackswap fit --workload llama-7b --global-batch 64 --layout fsdp\n";
  const size_t at = readme.find(start);
  ASSERT_NE(at, std::string::npos);
  const size_t end = readme.find("```", at);
  const std::string example =
      readme.substr(at + start.size(), end - at - start.size());
  Outcome o = Slackswap({"fit", "--workload", "llama-7b", "--global-batch",
                         "64", "--layout", "fsdp"});
  ASSERT_EQ(o.code, 0) << o;
  EXPECT_EQ(o.out, example);
}

TEST(FitTest, AJobTakesNodesLayoutsAndPricesAsJsonToo) {
  Outcome o = Slackswap({"fit", "--workload", "llama-7b", "--layers", "2",
                         "--seq", "128", "--global-batch", "16", "--node",
                         "gh200-4x,dgx-a100-80gb", "--layout", "tp8-fsdp,dp",
                         "--prices", "40,30", "--json"});
  ASSERT_EQ(o.code, 0) << o;
  v1::FitResponse resp;
  ASSERT_TRUE(ParsedJson(o.out, &resp));
  EXPECT_EQ(resp.global_batch(), 16);
  EXPECT_EQ(resp.ranked_by(), "cost_per_1000_steps");
  ASSERT_EQ(resp.results_size(), 4);
  int fitting = 0;
  for (const v1::FitResult& f : resp.results()) {
    SCOPED_TRACE(absl::StrCat(f.node_name(), " ", f.layout_name()));
    if (f.node_name() == "gh200-4x" && f.layout().tensor_parallel() == 8) {
      EXPECT_FALSE(f.fits_device());
      EXPECT_THAT(f.summary(), HasSubstr("does not divide the node's 4 GPUs"));
      continue;
    }
    ASSERT_TRUE(f.fits_device()) << f.summary();
    ++fitting;
    EXPECT_EQ(f.rank(), fitting);
  }
  EXPECT_EQ(fitting, 3);
  ExpectOneLineError(Slackswap({"fit", "--workload", "llama-7b",
                                "--global-batch", "16", "--layout", "tpx"}),
                     "INVALID_ARGUMENT", "--layout: \"tpx\" is not a layout");
  ExpectOneLineError(
      Slackswap({"fit", "--workload", "llama-7b", "--node", "gh200-4x"}),
      "INVALID_ARGUMENT", "--node is for a job: give its --global-batch");
  ExpectOneLineError(
      Slackswap({"fit", "--workload", "llama-7b", "--global-batch", "16",
                 "--hardware", "h100-pcie5"}),
      "INVALID_ARGUMENT", "--hardware is for a step on GPUs");
  ExpectOneLineError(
      Slackswap({"fit", "--workload", "llama-7b", "--global-batch", "16",
                 "--node", "gh200-4x", "--prices", "1,2"}),
      "INVALID_ARGUMENT", "--prices gives 2 prices for 1 --node");
  ExpectOneLineError(Slackswap({"fit", "--workload", "llama-7b",
                                "--global-batch", "16", "--batch", "2"}),
                     "INVALID_ARGUMENT", "workload.batch: a job sets it");
}

TEST(PlanTest, PlanNamingAMissingTensorIsRejected) {
  const std::string plan = TempPath("missing.txtpb");
  WriteAll(plan, "decisions { tensor_id: 999999 action: ACTION_RECOMPUTE }\n");
  ExpectOneLineError(Slackswap({"simulate", "--workload", "gpt2-xl", "--layers",
                                "2", "--plan", plan}),
                     "INVALID_ARGUMENT", "999999");
}

}  // namespace
}  // namespace slackswap

// --- Nodes ------------------------------------------------------------------

namespace slackswap {
namespace {

std::vector<std::string> NodeArgs(std::vector<std::string> more) {
  std::vector<std::string> args = {"simulate",     "--workload", "gpt2-xl",
                                   "--layers",     "2",          "--node",
                                   "dgx-a100-80gb"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(NodeTest, SimulateOnANodePrintsTheSlowestRankThenRanksAndLinks) {
  Outcome o = Slackswap(NodeArgs({"--ranks", "4"}));
  ASSERT_EQ(o.code, 0) << o;
  EXPECT_THAT(o.out, StartsWith("gpt2-xl on dgx-a100-80gb, slowest rank "));
  EXPECT_THAT(o.out, HasSubstr("\nnode dgx-a100-80gb, 4 ranks\n"));
  EXPECT_THAT(o.out, HasSubstr("\n  rank  gpu    step ms  retained %  "
                               "stalls ms  peak activation\n"));
  EXPECT_THAT(o.out, HasSubstr("\n  link                           H2D GB   "
                               "D2H GB   H2D %   D2H %\n"));
  EXPECT_THAT(o.out, HasSubstr("\n  GPU 3 link "));
  EXPECT_THAT(o.out, Not(HasSubstr("GPU 4 link")));
  EXPECT_THAT(o.out, HasSubstr("\n  pinned on socket-0: peak "));
}

TEST(NodeTest, JsonIsASimulateResponseWithEveryRank) {
  Outcome o = Slackswap(NodeArgs({"--json"}));
  ASSERT_EQ(o.code, 0) << o;
  v1::SimulateResponse resp;
  ASSERT_TRUE(ParsedJson(o.out, &resp));
  ASSERT_EQ(resp.node().ranks_size(), 8);
  EXPECT_EQ(resp.node().node_name(), "dgx-a100-80gb");
  EXPECT_EQ(resp.result().step_ns(), resp.node().step_ns());
  EXPECT_EQ(resp.node().links_size(), 8 + 4 + 2);
}

// A node's Chrome trace: its processes by pid, and per counter track of
// the shared links' process (pid `links_pid`) its samples and the most it
// shows either way.
struct NodeTrace {
  std::map<int, std::string> processes;
  std::map<std::string, int> samples;
  std::map<std::string, double> most;
};

NodeTrace ReadNodeTrace(const std::string& path, int links_pid) {
  NodeTrace t;
  Struct parsed;
  EXPECT_TRUE(ParsedJson(ReadAll(path), &parsed));
  if (!parsed.fields().contains("traceEvents")) return t;
  for (const Value& e :
       parsed.fields().at("traceEvents").list_value().values()) {
    const auto& f = e.struct_value().fields();
    const std::string ph = f.at("ph").string_value();
    const int pid = static_cast<int>(f.at("pid").number_value());
    if (ph == "M" && f.at("name").string_value() == "process_name") {
      t.processes[pid] =
          f.at("args").struct_value().fields().at("name").string_value();
    }
    if (ph != "C" || pid != links_pid) continue;
    const std::string name = f.at("name").string_value();
    ++t.samples[name];
    for (const char* dir : {"h2d_bytes_per_s", "d2h_bytes_per_s"}) {
      t.most[name] =
          std::max(t.most[name],
                   f.at("args").struct_value().fields().at(dir).number_value());
    }
  }
  return t;
}

TEST(NodeTest, TheTraceHasAProcessPerRankAndACounterPerLink) {
  // A plan that swaps, so that the links carry copies.
  const std::string plan = TempPath("node_plan.txtpb");
  Outcome p = Slackswap({"plan", "--workload", "gpt2-xl", "--layers", "2",
                         "--hardware", kHardware, "--budget", "0.6", "--policy",
                         "swap_only", "--out", plan});
  ASSERT_EQ(p.code, 0) << p;
  const std::string trace = TempPath("node_trace.json");
  Outcome o =
      Slackswap(NodeArgs({"--ranks", "2", "--plan", plan, "--trace", trace}));
  ASSERT_EQ(o.code, 0) << o;
  NodeTrace t = ReadNodeTrace(trace, 3);
  ASSERT_EQ(t.processes.size(), 3u);
  EXPECT_EQ(t.processes[1], "rank 0 (GPU 0): gpt2-xl on dgx-a100-80gb");
  EXPECT_EQ(t.processes[2], "rank 1 (GPU 1): gpt2-xl on dgx-a100-80gb");
  EXPECT_EQ(t.processes[3], "shared links: gpt2-xl on dgx-a100-80gb");
  // GPUs 0 and 1 share switch 0's uplink and socket 0's memory.
  EXPECT_EQ(t.samples.size(), 4u);
  EXPECT_GT(t.most["GPU 0 link"], 0);
  EXPECT_GT(t.most["socket socket-0 memory"], 0);
}

// A DDP step's all-reduces load the NVLink ports, which no host copy
// crosses: their tracks are in the trace (and, as the events, their series
// are not in the JSON beside it).
TEST(NodeTest, TheTraceShowsTheCollectivesOnNvlink) {
  const std::string trace = TempPath("ddp_trace.json");
  Outcome o = Slackswap(
      NodeArgs({"--dp", "2", "--ranks", "2", "--trace", trace, "--json"}));
  ASSERT_EQ(o.code, 0) << o;
  v1::SimulateResponse resp;
  ASSERT_TRUE(ParsedJson(o.out, &resp));
  int nvlinks = 0;
  for (const v1::LinkUsage& link : resp.node().links()) {
    if (!absl::StrContains(link.name(), "NVLink")) continue;
    ++nvlinks;
    EXPECT_GT(link.d2h_bytes(), 0) << link.name();
    EXPECT_EQ(link.load_size(), 0) << link.name();
  }
  EXPECT_EQ(nvlinks, 2);
  NodeTrace t = ReadNodeTrace(trace, 3);
  EXPECT_EQ(t.processes[3], "shared links: gpt2-xl on dgx-a100-80gb");
  for (const char* port : {"GPU 0 NVLink", "GPU 1 NVLink"}) {
    EXPECT_GT(t.samples[port], 1) << port;
    EXPECT_GT(t.most[port], 0) << port;
  }
}

TEST(NodeTest, TheSvgHasAPanelPerRankAndPerLinkCarryingCopies) {
  const std::string svg = TempPath("node.svg");
  Outcome o = Slackswap(NodeArgs({"--ranks", "2", "--svg", svg, "--json"}));
  ASSERT_EQ(o.code, 0) << o;
  const std::string picture = ReadAll(svg);
  EXPECT_THAT(picture, HasSubstr("<title>gpt2-xl on dgx-a100-80gb</title>"));
  EXPECT_THAT(picture, HasSubstr("id=\"r1-memory\""));
  EXPECT_THAT(picture, Not(HasSubstr("id=\"r2-memory\"")));
  // The picture is in the file, not in the JSON; the events recorded for
  // it are not there either.
  EXPECT_THAT(o.out, HasSubstr("\"svg\": \"\""));
  EXPECT_THAT(o.out, HasSubstr("\"events\": []"));
  EXPECT_THAT(o.out, Not(HasSubstr("\"start_ns\"")));
}

TEST(NodeTest, BadNodeFlagsAreRefused) {
  ExpectOneLineError(Slackswap(NodeArgs({"--ranks", "9"})), "INVALID_ARGUMENT",
                     "step.ranks must be in [0, 8]");
  ExpectOneLineError(
      Slackswap({"simulate", "--workload", "gpt2-xl", "--ranks", "2"}),
      "INVALID_ARGUMENT", "--ranks is for --node");
  ExpectOneLineError(
      Slackswap({"simulate", "--workload", "gpt2-xl", "--node", "dgx-z9"}),
      "INVALID_ARGUMENT", "step.node_name: unknown node \"dgx-z9\"");
}

}  // namespace
}  // namespace slackswap
