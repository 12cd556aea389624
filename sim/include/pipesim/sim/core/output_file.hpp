// Output files are written under a temporary name beside their destination and renamed into place when
// complete, so a reader never sees a half-written file and a failed run leaves the previous one intact; an
// interrupt (SIGINT, SIGTERM) removes the temporaries being written before the process ends.
#pragma once

#include <fstream>
#include <ostream>
#include <string>

namespace pipesim::sim {

class OutputFile {
 public:
  /// Opens `<path>.tmp-<pid>` (creating missing parent folders); throws InputError naming `path`.
  explicit OutputFile(std::string path);
  ~OutputFile();  ///< removes the temporary when commit() was not reached
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return out_; }
  const std::string& temporary_path() const { return tmp_; }
  /// Flushes, closes and renames the temporary onto `path`; throws InputError when any step fails.
  void commit();

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
  int slot_ = -1;  ///< where an interrupt handler finds the temporary to remove
};

/// A temporary written by someone else (a library writing its own output file): removed if an interrupt ends
/// the process while this guard lives.
class RemovedOnInterrupt {
 public:
  explicit RemovedOnInterrupt(const std::string& path);
  ~RemovedOnInterrupt();
  RemovedOnInterrupt(const RemovedOnInterrupt&) = delete;
  RemovedOnInterrupt& operator=(const RemovedOnInterrupt&) = delete;

 private:
  int slot_ = -1;
};

/// Writes `text` to `path` through a temporary name.
void write_output_file(const std::string& path, const std::string& text);

}  // namespace pipesim::sim
