#include "pipesim/sim/output_file.hpp"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "pipesim/sim/error.hpp"

namespace pipesim::sim {

namespace fs = std::filesystem;

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  const fs::path p(path_);
  {
    // Renaming over a device or a folder would replace it: only regular files (or new ones) are written.
    std::error_code ec;
    const auto status = fs::status(p, ec);
    if (!ec && fs::exists(status) && !fs::is_regular_file(status))
      throw InputError(path_, "", "exists and is not a regular file; give a file path to write");
  }
  if (p.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
  }
  tmp_ = path_ + ".tmp-" + std::to_string(::getpid());
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw InputError(path_, "", "cannot write this file (or a temporary beside it)");
}

OutputFile::~OutputFile() {
  if (committed_) return;
  out_.close();
  std::error_code ec;
  fs::remove(tmp_, ec);
}

void OutputFile::commit() {
  out_.flush();
  const bool written = static_cast<bool>(out_);
  out_.close();
  std::error_code ec;
  if (written && !out_.fail()) fs::rename(tmp_, path_, ec);
  if (!written || out_.fail() || ec)
    throw InputError(path_, "",
                     ec ? "cannot rename the finished file into place: " + ec.message()
                        : "writing the file failed (disk full?)");
  committed_ = true;
}

void write_output_file(const std::string& path, const std::string& text) {
  OutputFile f(path);
  f.stream() << text;
  f.commit();
}

}  // namespace pipesim::sim
