#include "pipesim/sim/core/output_file.hpp"

#include <unistd.h>

#include <array>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

namespace fs = std::filesystem;

namespace {

// Temporaries being written, removed by SIGINT/SIGTERM before the process dies, so an interrupted run (a
// calibration stopped with Ctrl-C) leaves neither a partial file nor its temporary. Fixed-size slots: the
// handler may only call async-signal-safe functions (unlink) on memory that is never reallocated.
constexpr std::size_t kSlots = 64, kPathMax = 4096;
std::array<std::array<char, kPathMax>, kSlots> g_temporaries{};
std::array<volatile std::sig_atomic_t, kSlots> g_in_use{};
std::mutex g_slots_mutex;

extern "C" void remove_temporaries_and_die(int sig) {
  for (std::size_t i = 0; i < kSlots; ++i)
    if (g_in_use[i]) ::unlink(g_temporaries[i].data());
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

int register_temporary(const std::string& path) {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM})
      if (std::signal(sig, SIG_IGN) != SIG_IGN) std::signal(sig, remove_temporaries_and_die);
    return true;
  }();
  (void)installed;
  if (path.size() >= kPathMax) return -1;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (std::size_t i = 0; i < kSlots; ++i)
    if (!g_in_use[i]) {
      std::memcpy(g_temporaries[i].data(), path.c_str(), path.size() + 1);
      g_in_use[i] = 1;
      return static_cast<int>(i);
    }
  return -1;
}

void release_temporary(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  g_in_use[static_cast<std::size_t>(slot)] = 0;
}

}  // namespace

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
  slot_ = register_temporary(tmp_);
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    release_temporary(slot_);
    throw InputError(path_, "", "cannot write this file (or a temporary beside it)");
  }
}

OutputFile::~OutputFile() {
  if (!committed_) {
    out_.close();
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
  release_temporary(slot_);
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

RemovedOnInterrupt::RemovedOnInterrupt(const std::string& path) : slot_(register_temporary(path)) {}

RemovedOnInterrupt::~RemovedOnInterrupt() {
  release_temporary(slot_);
}

void write_output_file(const std::string& path, const std::string& text) {
  OutputFile f(path);
  f.stream() << text;
  f.commit();
}

}  // namespace pipesim::sim
