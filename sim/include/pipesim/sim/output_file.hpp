// Output files are written under a temporary name beside their destination and renamed into place when
// complete, so a reader never sees a half-written file and a failed run leaves the previous one intact.
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
};

/// Writes `text` to `path` through a temporary name.
void write_output_file(const std::string& path, const std::string& text);

}  // namespace pipesim::sim
