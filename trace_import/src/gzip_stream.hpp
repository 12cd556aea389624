// A file read through zlib as a std::istream: gzip-compressed or plain (zlib passes plain bytes through),
// a buffer at a time, so a trace of any size streams in bounded memory.
#pragma once

#include <array>
#include <istream>
#include <streambuf>
#include <string>

#include <zlib.h>

namespace pipesim::trace_import {

class GzipInput {
 public:
  /// Opens `path`; throws InputError when it cannot be read.
  explicit GzipInput(const std::string& path);
  ~GzipInput();
  GzipInput(const GzipInput&) = delete;
  GzipInput& operator=(const GzipInput&) = delete;
  std::istream& stream() { return stream_; }

 private:
  class Buffer : public std::streambuf {
   public:
    Buffer(gzFile file, std::string path) : file_(file), path_(std::move(path)) {}

   protected:
    int_type underflow() override;

   private:
    gzFile file_;
    std::string path_;
    std::array<char, 1 << 16> data_{};
  };
  gzFile file_;
  Buffer buffer_;
  std::istream stream_;
};

}  // namespace pipesim::trace_import
