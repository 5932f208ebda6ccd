// `onnxamp train` and `onnxamp export` writing to a real full disk (a tiny tmpfs mounted in a mount namespace of the
// test's own): a one-line error naming the file and the OS's reason, exit status 1, and nothing left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "importer/tensor_file.h"
#include "tests/tmpfs_child.h"
#include "tests/tools/process_util.h"

namespace onnxamp::tools_test {
namespace {

const std::string kDigitsMlp = ModelsDir() + "/digits_mlp.onnx";

// Names in `dir`, sorted, joined by ","; "<missing>" when it cannot be listed.
std::string Listing(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  if (ec) return "<missing>";
  std::sort(names.begin(), names.end());
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

TEST(FullDiskCliTest, TrainOutputCheckpointAndExportFailInOneLineAndLeaveNothing) {
  TempDir dir;
  ir::Tensor features(DType::kFloat32, {24, 64});
  for (size_t i = 0; i < features.mutable_values<float>().size(); ++i) {
    features.mutable_values<float>()[i] = static_cast<float>(i % 17) / 17.0f;
  }
  features.set_name("input");
  ir::Tensor labels(DType::kInt64, {24});
  for (int64_t i = 0; i < 24; ++i) labels.mutable_values<int64_t>()[static_cast<size_t>(i)] = i % 10;
  labels.set_name("label");
  const std::string data = dir / "digits.npz";
  ASSERT_TRUE(importer::WriteNpz({features, labels}, data).ok());
  auto train = [&](std::vector<std::string> more) {
    std::vector<std::string> a = {"train", kDigitsMlp, "--data", data,           "--labels", "label",     "--loss",
                                  "ce",    "--steps",  "2",      "--batch-size", "8",        "--threads", "1"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  // A checkpoint on the ordinary disk, for the export.
  ProcessResult r = RunOnnxamp(train({"--checkpoint-dir", dir / "ck", "-o", dir / "trained.onnx"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string mount = dir / "disk";
  ASSERT_TRUE(std::filesystem::create_directory(mount));

  // 16 KiB: less than the model (38 KiB).
  const tmpfs_child::TmpfsChildReport child =
      tmpfs_child::RunWithTmpfs(mount, 16 << 10, [&](std::map<std::string, std::string>& report) {
        auto run = [&](const std::string& key, const std::vector<std::string>& args) {
          const ProcessResult p = RunOnnxamp(args);
          report[key + ".exit"] = std::to_string(p.exit_code);
          const std::vector<std::string> lines = Lines(p.err);
          report[key + ".last"] = lines.empty() ? "" : lines.back();
          report[key + ".listing"] = Listing(mount);
        };
        run("train", train({"-o", mount + "/out.onnx"}));
        run("checkpoint", train({"--checkpoint-dir", mount + "/ck", "-o", dir / "x.onnx"}));
        report["checkpoint.folder"] = Listing(mount + "/ck");
        std::filesystem::remove_all(mount + "/ck");
        run("export", {"export", dir / "ck", "-o", mount + "/exported.onnx"});
      });
  if (!child.skip.empty()) GTEST_SKIP() << "cannot set up a tmpfs: " << child.skip;
  ASSERT_TRUE(child.failure.empty()) << child.failure;
  auto value = [&](const std::string& key) {
    auto it = child.values.find(key);
    return it == child.values.end() ? "<" + key + " not reported>" : it->second;
  };
  for (const auto& [key, file] :
       std::vector<std::pair<std::string, std::string>>{{"train", mount + "/out.onnx"},
                                                        {"checkpoint", mount + "/ck/step-00000002/model.onnx"},
                                                        {"export", mount + "/exported.onnx"}}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(value(key + ".exit"), "1");
    const std::string last = value(key + ".last");
    EXPECT_EQ(last.rfind("error: ", 0), 0u) << last;
    EXPECT_NE(last.find(file + ": "), std::string::npos) << last;
    EXPECT_NE(last.find("No space left on device"), std::string::npos) << last;
  }
  EXPECT_EQ(value("train.listing"), "");
  EXPECT_EQ(value("checkpoint.listing"), "ck");
  EXPECT_EQ(value("checkpoint.folder"), "");
  EXPECT_EQ(value("export.listing"), "");
}

}  // namespace
}  // namespace onnxamp::tools_test
