#include "gzip_stream.hpp"

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::trace_import {

GzipInput::GzipInput(const std::string& path)
    : file_(gzopen(path.c_str(), "rb")), buffer_(file_, path), stream_(&buffer_) {
  if (file_ == nullptr) throw sim::InputError(path, "", "cannot open the file for reading");
  // An error while decompressing is thrown from the buffer; the stream passes it on instead of only
  // setting its bad bit.
  stream_.exceptions(std::ios::badbit);
}

GzipInput::~GzipInput() {
  if (file_ != nullptr) gzclose(file_);
}

GzipInput::Buffer::int_type GzipInput::Buffer::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  const int n = gzread(file_, data_.data(), static_cast<unsigned>(data_.size()));
  if (n < 0) {
    int code = 0;
    const char* why = gzerror(file_, &code);
    throw sim::InputError(path_, "", fmt::format("cannot be decompressed: {}", why ? why : "zlib error"));
  }
  if (n == 0) return traits_type::eof();
  setg(data_.data(), data_.data(), data_.data() + n);
  return traits_type::to_int_type(*gptr());
}

}  // namespace pipesim::trace_import
