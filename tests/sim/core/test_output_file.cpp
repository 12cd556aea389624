// Output files appear whole or not at all.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/output_file.hpp"

namespace pipesim::sim {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputFile, AppearsOnlyWhenCommitted) {
  const fs::path dir = fs::temp_directory_path() / "pipesim-output-file-test";
  fs::remove_all(dir);
  const fs::path target = dir / "sub" / "out.json";
  {
    OutputFile f(target.string());  // creates the missing folders
    f.stream() << "partial";
    EXPECT_FALSE(fs::exists(target));  // still under its temporary name
    EXPECT_TRUE(fs::exists(f.temporary_path()));
  }  // abandoned: no file, no temporary left
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(std::distance(fs::directory_iterator(target.parent_path()), fs::directory_iterator{}), 0);
  write_output_file(target.string(), "old");
  {
    OutputFile f(target.string());
    f.stream() << "new";
    EXPECT_EQ(read(target), "old");  // the previous file stays until the new one is complete
    f.commit();
  }
  EXPECT_EQ(read(target), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(target.parent_path()), fs::directory_iterator{}), 1);
  fs::remove_all(dir);
}

TEST(OutputFile, UnwritablePlaceIsAnInputError) {
  EXPECT_THROW(OutputFile("/proc/pipesim-cannot-write/out.json"), InputError);
}

TEST(OutputFile, AnInterruptRemovesTheTemporaryBeingWritten) {
  const fs::path dir = fs::temp_directory_path() / "pipesim-output-file-interrupt";
  fs::remove_all(dir);
  const fs::path target = dir / "profile.json";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // writes half a file, then is interrupted as Ctrl-C would
    OutputFile f(target.string());
    f.stream() << "{\"half\": ";
    f.stream().flush();
    std::raise(SIGINT);
    ::_exit(0);  // not reached: the handler re-raises with the default action
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the interrupt must still end the process";
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_FALSE(fs::exists(target.string() + ".tmp-" + std::to_string(child)));
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipesim::sim
