// Typed errors of the pipesim libraries. Library code throws these; only cli/ turns them into exit codes.
// An InputError names the file (or the option), the JSON path inside it and what is wrong, so the user gets
// one clear line.
#pragma once

#include <stdexcept>
#include <string>

#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim {

/// Bad user input: a malformed or unknown key, an out-of-range number, an impossible configuration.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string json_path, std::string message)
      : std::runtime_error(format(file, json_path, message)),
        file_(std::move(file)),
        json_path_(std::move(json_path)),
        message_(std::move(message)) {}

  /// The option at fault, as the front end spells it, in place of a file.
  InputError(Option option, std::string json_path, std::string message)
      : InputError(spelled(option), std::move(json_path), std::move(message)) {}

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& message() const { return message_; }

 private:
  static std::string format(const std::string& file, const std::string& path, const std::string& msg) {
    std::string out;
    if (!file.empty()) out += file + ": ";
    if (!path.empty()) out += path + ": ";
    return printable(out + msg);
  }
  /// One line whatever the input echoed: control characters become \n, \t or \xHH.
  static std::string printable(const std::string& s) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c < 0x20 || c == 0x7f)
        out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
      else
        out += ch;
    }
    return out;
  }
  std::string file_;
  std::string json_path_;
  std::string message_;
};

/// A result that breaks a physical invariant (an MFU above 1, a step shorter than the work it holds): a bug
/// in pipesim, never in the user's input. The command line reports it as an internal error, exit code 3,
/// and prints no number.
class InvariantError : public std::runtime_error {
 public:
  InvariantError(std::string invariant, const std::string& detail)
      : std::runtime_error("invariant '" + invariant + "' violated: " + detail),
        invariant_(std::move(invariant)) {}
  const std::string& invariant() const { return invariant_; }

 private:
  std::string invariant_;
};

/// A plan that cannot execute: a dependency cycle or a stream order that would deadlock.
class DeadlockError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace pipesim::sim
