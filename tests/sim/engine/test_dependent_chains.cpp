#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/dependent_chains.hpp"

namespace pipesim::sim {
namespace {

/// Each op's dependents as listed by the chains, in the order the engine releases them.
std::vector<std::vector<OpId>> listed(const DependentChains& chains, const std::vector<OpId>& heads) {
  std::vector<std::vector<OpId>> out(heads.size());
  std::vector<OpId> scratch;
  for (std::size_t d = 0; d < heads.size(); ++d)
    chains.for_each(heads[d], scratch, [&](OpId op) { out[d].push_back(op); });
  return out;
}

TEST(DependentChains, ListsEachOpsDependentsInPlanOrder) {
  DependentChains chains;
  std::vector<OpId> heads(3, -1);
  chains.add(heads[0], 1, "plan");
  chains.add(heads[0], 2, "plan");
  chains.add(heads[0], 2, "plan");  // an op that names its dependency twice is released twice
  chains.add(heads[1], 2, "plan");
  EXPECT_EQ(heads[1], 2);  // one dependent: the op itself, no link
  const auto got = listed(chains, heads);
  EXPECT_EQ(got[0], (std::vector<OpId>{1, 2, 2}));
  EXPECT_EQ(got[1], (std::vector<OpId>{2}));
  EXPECT_TRUE(got[2].empty());
}

TEST(DependentChains, TwoHalvesJoinedListAsOnePass) {
  // Random dependencies among 400 ops, gathered in one pass and in two halves split at each of several
  // points: every op lists the same dependents in the same order.
  constexpr int kOps = 400;
  std::mt19937 rng(7);
  std::vector<std::vector<OpId>> deps(kOps);
  for (int i = 0; i < kOps; ++i) {
    const int k = static_cast<int>(rng() % 4);
    for (int j = 0; j < k; ++j) deps[i].push_back(static_cast<OpId>(rng() % (rng() % 2 ? kOps : 8)));
  }
  DependentChains whole;
  std::vector<OpId> whole_heads(kOps, -1);
  for (int i = 0; i < kOps; ++i)
    for (OpId d : deps[i]) whole.add(whole_heads[static_cast<std::size_t>(d)], i, "plan");
  const auto expected = listed(whole, whole_heads);
  for (const int split : {0, 1, 5, 200, 399, 400}) {
    DependentChains first, second;
    std::vector<OpId> first_heads(kOps, -1), second_heads(kOps, -1);
    for (int i = 0; i < kOps; ++i)
      for (OpId d : deps[i])
        (i < split ? first : second)
            .add((i < split ? first_heads : second_heads)[static_cast<std::size_t>(d)], i, "plan");
    const std::int32_t offset = first.absorb(second, "plan");
    std::vector<OpId> heads(kOps);
    for (std::size_t d = 0; d < heads.size(); ++d)
      heads[d] = first.join(first_heads[d], second_heads[d], offset, "plan");
    EXPECT_EQ(listed(first, heads), expected) << "split at " << split;
  }
}

}  // namespace
}  // namespace pipesim::sim
