// did_you_mean: the closest candidate within edit distance max(2, len/3), distances worked out
// by hand (substitutions, insertions, deletions each count one).
#include <doctest/doctest.h>

#include "opforge/suggest.hpp"

namespace opforge {
namespace {

TEST_CASE("did_you_mean: the closest name within the distance limit, else nothing") {
  // "adma" -> "adam": two substitutions.
  CHECK(did_you_mean("apply_adma", {"apply_adagrad", "apply_adam"}) ==
        " (did you mean 'apply_adam'?)");
  CHECK(did_you_mean("lrr", {"lr", "beta1"}) == " (did you mean 'lr'?)");  // one deletion
  CHECK(did_you_mean("gard", {"grad"}) == " (did you mean 'grad'?)");
  CHECK(did_you_mean("xyz", {"apply_adam"}).empty());
  CHECK(did_you_mean("anything", {}).empty());
}

TEST_CASE("did_you_mean: the limit is 2 edits, or a third of the name when longer") {
  // Six letters: limit 2.
  CHECK(did_you_mean("abcdef", {"abcxyf"}) == " (did you mean 'abcxyf'?)");  // 2
  CHECK(did_you_mean("abcdef", {"axyzef"}).empty());                         // 3
  // Twelve letters: limit 4.
  CHECK(did_you_mean("abcdefghijkl", {"abcdefghwxyz"}) == " (did you mean 'abcdefghwxyz'?)");  // 4
  CHECK(did_you_mean("abcdefghijkl", {"abcdefgvwxyz"}).empty());                               // 5
}

TEST_CASE("did_you_mean: the nearest wins; among equals, the first listed") {
  CHECK(did_you_mean("abc", {"axy", "abd"}) == " (did you mean 'abd'?)");
  CHECK(did_you_mean("abc", {"abd", "abe"}) == " (did you mean 'abd'?)");
  CHECK(did_you_mean("abc", {"abe", "abd"}) == " (did you mean 'abe'?)");
}

}  // namespace
}  // namespace opforge
