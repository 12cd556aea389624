#include <gtest/gtest.h>

#include <string>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim {
namespace {

std::string shout(std::string_view key) {
  return "<" + std::string(key) + ">";
}

TEST(Option, ErrorsNameTheOptionAsTheFrontEndSpellsIt) {
  // Without a front end the key is written as it is.
  EXPECT_EQ(spelled(Option{"microbatch_size"}), "microbatch_size");
  EXPECT_STREQ(InputError(Option{"pp"}, "", "must be >= 1").what(), "pp: must be >= 1");

  set_option_spelling(&shout);
  EXPECT_EQ(spelled(Option{"pp/tp/dp"}), "<pp>/<tp>/<dp>");
  EXPECT_STREQ(InputError(Option{"seq/microbatch_size"}, "", "too long").what(),
               "<seq>/<microbatch_size>: too long");
  set_option_spelling(nullptr);  // back to the keys
  EXPECT_EQ(spelled(Option{"pp/tp"}), "pp/tp");
}

}  // namespace
}  // namespace pipesim::sim
