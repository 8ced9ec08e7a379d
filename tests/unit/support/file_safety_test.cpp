// The file-safety helpers: side files contained in the model's folder, inputs opened without
// blocking (regular files only), outputs that never replace a device, a link or an input, output
// folders named with the real reason, and a truncated mapping turned into one coded line.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "kiln/support/atomic_file.h"
#include "kiln/support/contained_path.h"
#include "kiln/support/input_file.h"
#include "kiln/support/mapped_file.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

fs::path freshDir(const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / ("kiln_files_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void writeText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const SideFileRule kRule{ErrorCode::ExternalDataEscape, "data location", "keep it inside"};

} // namespace

TEST(ContainedPath, RefusesEveryWayOut) {
  fs::path root = freshDir("contain");
  fs::path model = root / "model";
  fs::create_directories(model / "sub");
  writeText(root / "outside.bin", "secret");
  writeText(model / "sub" / "w.bin", "weights");
  fs::create_symlink(root / "outside.bin", model / "out_link.bin");
  fs::create_symlink(root, model / "dir_link");
  fs::create_symlink("sub/w.bin", model / "in_link.bin");

  auto message = [&](const std::string& location) {
    auto r = resolveInsideFolder(model.string(), location, kRule);
    EXPECT_FALSE(r) << location;
    if (r) return std::string();
    EXPECT_EQ(r.status().code(), ErrorCode::ExternalDataEscape);
    EXPECT_EQ(r.status().hint(), "keep it inside");
    return r.status().message();
  };
  EXPECT_EQ(message((root / "outside.bin").string()),
            "data location '" + (root / "outside.bin").string() + "' is absolute");
  EXPECT_EQ(message("../outside.bin"), "data location '../outside.bin' leaves the model folder");
  EXPECT_EQ(message("sub/../../outside.bin"),
            "data location 'sub/../../outside.bin' leaves the model folder");
  EXPECT_EQ(message("out_link.bin"),
            "data location 'out_link.bin' resolves outside the model folder (to '" +
                fs::canonical(root / "outside.bin").string() + "')");
  EXPECT_NE(message("dir_link/outside.bin").find("resolves outside the model folder"),
            std::string::npos);
  EXPECT_EQ(message(""), "data location is empty");
  EXPECT_NE(message(".").find("resolves outside"), std::string::npos); // the folder itself

  auto inside = resolveInsideFolder(model.string(), "in_link.bin", kRule);
  ASSERT_TRUE(inside) << inside.status().toString();
  EXPECT_EQ(*inside, fs::canonical(model / "sub" / "w.bin").string());
  auto plain = resolveInsideFolder(model.string(), "sub/w.bin", kRule);
  ASSERT_TRUE(plain);
  auto missing = resolveInsideFolder(model.string(), "sub/none.bin", kRule);
  EXPECT_TRUE(missing); // opening it reports K1001
  fs::remove_all(root);
}

// A FIFO used to block open() forever; now it is refused at once, as are folders and devices.
TEST(InputFile, RefusesSpecialFilesWithoutBlocking) {
  fs::path dir = freshDir("inputs");
  fs::path fifo = dir / "model.onnx";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto started = std::chrono::steady_clock::now();
  auto opened = MappedFile::open(fifo.string());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.status().toString(),
            "K1002: '" + fifo.string() +
                "' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file");
  auto text = readInputFile(fifo.string());
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().code(), ErrorCode::FileUnreadable);

  auto folder = readInputFile(dir.string());
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.status().message(),
            "'" + dir.string() + "' is not a regular file (it is a folder)");
  auto device = MappedFile::open("/dev/null");
  ASSERT_FALSE(device);
  EXPECT_EQ(device.status().message(),
            "'/dev/null' is not a regular file (it is a character device)");
  auto missing = readInputFile((dir / "none").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::FileNotFound);

  writeText(dir / "config.ini", "[a]\nb=1\n");
  auto config = readInputFile((dir / "config.ini").string());
  ASSERT_TRUE(config);
  EXPECT_EQ(*config, "[a]\nb=1\n");
  fs::remove_all(dir);
}

// Outputs: a device, FIFO, folder or symlink at the output path is refused and left as it was
// (rename would have replaced it with a regular file); so is the input itself under any name.
TEST(OutputTarget, RefusesWhatItWouldReplace) {
  fs::path dir = freshDir("outputs");
  auto refusal = [](const fs::path& path) {
    Status s = writeFileAtomically(path.string(), std::string("out"));
    EXPECT_FALSE(s) << path;
    EXPECT_EQ(s.code(), ErrorCode::FileWriteFailed);
    return s.message();
  };
  // A private null device (root only), so a regression cannot replace the system's /dev/null.
  fs::path device = dir / "null";
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    EXPECT_EQ(refusal(device), "refusing to write '" + device.string() +
                                   "': it is a character device, which kiln would replace with a "
                                   "file");
    struct stat info {};
    ASSERT_EQ(::lstat(device.c_str(), &info), 0);
    EXPECT_TRUE(S_ISCHR(info.st_mode));
  }
  EXPECT_EQ(checkOutputTarget("/dev/null").message(),
            "refusing to write '/dev/null': it is a character device, which kiln would replace "
            "with a file");

  fs::path fifo = dir / "out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(refusal(fifo).find("it is a FIFO (named pipe)"), std::string::npos);
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_NE(refusal(dir).find("it is a folder"), std::string::npos);

  writeText(dir / "victim.txt", "keep");
  fs::create_symlink(dir / "victim.txt", dir / "link.onnx");
  EXPECT_EQ(refusal(dir / "link.onnx"), "refusing to write '" + (dir / "link.onnx").string() +
                                            "': it is a symbolic link (to '" +
                                            (dir / "victim.txt").string() + "')");
  EXPECT_TRUE(fs::is_symlink(dir / "link.onnx"));
  EXPECT_EQ(readText(dir / "victim.txt"), "keep");

  // Read as an input, a file may not be replaced: not by its name, not through a hard link.
  writeText(dir / "model.onnx", "model");
  fs::create_hard_link(dir / "model.onnx", dir / "alias.onnx");
  auto input = MappedFile::open((dir / "model.onnx").string());
  ASSERT_TRUE(input);
  EXPECT_EQ(refusal(dir / "model.onnx"),
            "refusing to write '" + (dir / "model.onnx").string() + "': it is the input '" +
                (dir / "model.onnx").string() + "', which the output would replace");
  EXPECT_NE(refusal(dir / "alias.onnx").find("it is the input"), std::string::npos);
  EXPECT_EQ(readText(dir / "model.onnx"), "model");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();

  // A file this process wrote may be read back and written again.
  ASSERT_TRUE(writeFileAtomically((dir / "mine.txt").string(), std::string("1")));
  ASSERT_TRUE(readInputFile((dir / "mine.txt").string()));
  EXPECT_TRUE(writeFileAtomically((dir / "mine.txt").string(), std::string("2")));
  EXPECT_EQ(readText(dir / "mine.txt"), "2");
  fs::remove_all(dir);
}

// An output folder kiln cannot create is named with the real reason. (It used to be created
// silently or not at all, and the write then said "No such file or directory".) Root ignores
// permission bits, so an immutable folder stands in for a read-only one.
TEST(OutputFolder, NamesTheRealReason) {
  fs::path dir = freshDir("folder");
  writeText(dir / "file", "x");
  Status underFile = makeOutputFolder((dir / "file" / "sub").string());
  ASSERT_FALSE(underFile);
  EXPECT_EQ(underFile.code(), ErrorCode::FileWriteFailed);
  EXPECT_EQ(underFile.message().rfind(
                "cannot create the output folder '" + (dir / "file" / "sub").string() + "': ", 0),
            0u)
      << underFile.message();
  EXPECT_TRUE(makeOutputFolder((dir / "a" / "b").string()));
  EXPECT_TRUE(fs::is_directory(dir / "a" / "b"));

  fs::path locked = dir / "locked";
  fs::create_directories(locked);
  ::chmod(locked.c_str(), 0555);
  bool immutable = false;
  if (::geteuid() == 0)
    immutable = std::system(("chattr +i '" + locked.string() + "' 2>/dev/null").c_str()) == 0;
  if (::geteuid() != 0 || immutable) {
    Status s = makeOutputFolder((locked / "out").string());
    ASSERT_FALSE(s);
    EXPECT_TRUE(s.message() == "cannot create the output folder '" + (locked / "out").string() +
                                   "': Permission denied" ||
                s.message() == "cannot create the output folder '" + (locked / "out").string() +
                                   "': Operation not permitted")
        << s.message();
    EXPECT_NE(s.hint().find("make the folder writable"), std::string::npos);
    Status write = writeFileAtomically((locked / "x.onnx").string(), std::string("x"));
    ASSERT_FALSE(write);
    EXPECT_EQ(write.message().find("No such file"), std::string::npos) << write.message();
  }
  if (immutable) (void)std::system(("chattr -i '" + locked.string() + "'").c_str());
  ::chmod(locked.c_str(), 0755);
  fs::remove_all(dir);
  if (::geteuid() == 0 && !immutable) GTEST_SKIP() << "root, and chattr +i is unavailable here";
}

// A mapped input truncated under kiln used to kill it with SIGBUS; now the process prints one
// coded line naming the file, removes unfinished outputs and exits 1.
TEST(MappedFileDeathTest, TruncatedMappingIsOneCodedLine) {
  // The default ("fast") style forks here, so the child sees this test's folder; ctest runs each
  // test in its own process, so no other threads are around.
  fs::path dir = freshDir("sigbus");
  fs::path model = dir / "model.ms";
  writeText(model, std::string(3 * 65536, 'w'));
  fs::path output = dir / "out.onnx";
  EXPECT_EXIT(
      {
        auto file = MappedFile::open(model.string());
        if (!file) std::exit(3);
        // Truncated while an output is half written: the temp file must go too.
        (void)writeFileAtomically(output.string(), [&](std::ostream& os) {
          os << "partial";
          os.flush();
          ::truncate(model.c_str(), 0);
          volatile uint8_t byte = (*file)->data()[2 * 65536];
          os << byte;
          return Status::ok();
        });
        std::exit(4);
      },
      ::testing::ExitedWithCode(1),
      "^[a-z_]+: error K1002: '" + model.string() +
          "' became shorter while it was being read \\(truncated or rewritten in place\\)\\. "
          "Fix: leave input files unchanged while kiln uses them, then run again\n$");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  EXPECT_FALSE(fs::exists(output));
  fs::remove_all(dir);
}

// Inputs and outputs are remembered by file identity, and a deleted file's inode goes to the next
// file made: many deleted files later, an unrelated new file must be neither refused as an old
// input nor taken for an old output (both happened at random in this suite before).
TEST(OutputTarget, DeletedFilesLeaveNoIdentityBehind) {
  fs::path dir = freshDir("reuse");
  for (int i = 0; i < 64; ++i) {
    fs::path input = dir / ("in" + std::to_string(i) + ".onnx");
    writeText(input, "model");
    ASSERT_TRUE(MappedFile::open(input.string()));
    ASSERT_TRUE(
        writeFileAtomically((dir / ("out" + std::to_string(i))).string(), std::string("out")));
    fs::remove(input);
    fs::remove(dir / ("out" + std::to_string(i)));
  }
  for (int i = 0; i < 64; ++i) {
    fs::path fresh = dir / ("fresh" + std::to_string(i));
    writeText(fresh, "new");
    EXPECT_TRUE(writeFileAtomically(fresh.string(), std::string("replaced"))) << fresh;
  }
  for (int i = 0; i < 64; ++i) {
    fs::path model = dir / ("model" + std::to_string(i) + ".onnx");
    writeText(model, "model");
    ASSERT_TRUE(MappedFile::open(model.string()));
    Status s = writeFileAtomically(model.string(), std::string("out"));
    EXPECT_EQ(s.code(), ErrorCode::FileWriteFailed) << model;
  }
  fs::remove_all(dir);
}
