// Name and path validators.
#include <doctest/doctest.h>

#include <string>

#include "opforge/descriptor.h"

using namespace opforge::registry;

TEST_CASE("is_valid_op_name") {
  for (const char* good : {"a", "adam", "apply_adam", "apply_adam2", "x_1_", "z9"}) {
    CHECK_MESSAGE(is_valid_op_name(good), good);
  }
  for (const char* bad : {"", "Adam", "applyAdam", "9op", "_adam", "ad-am", "adam ", " adam",
                          "ad.am", "../x", "a/b", "\xc3\xa9t\xc3\xa9"}) {
    CHECK_FALSE_MESSAGE(is_valid_op_name(bad), bad);
  }
  CHECK(is_valid_op_name("a" + std::string(63, 'b')));        // 64 characters
  CHECK_FALSE(is_valid_op_name("a" + std::string(64, 'b')));  // 65 characters
  CHECK_FALSE(is_valid_op_name(std::string("ad\0am", 5)));
}

TEST_CASE("is_valid_identifier") {
  for (const char* good : {"x", "_", "_x", "Adam_1", "apply_adam_f32_avx2", "X9"}) {
    CHECK_MESSAGE(is_valid_identifier(good), good);
  }
  for (const char* bad : {"", "9a", "a-b", "a.b", "a b", "a/b", "updated.0", "$x"}) {
    CHECK_FALSE_MESSAGE(is_valid_identifier(bad), bad);
  }
  CHECK(is_valid_identifier(std::string(128, 'a')));
  CHECK_FALSE(is_valid_identifier(std::string(129, 'a')));
}

TEST_CASE("is_valid_schedule_param_key: identifiers and size buckets name@N") {
  for (const char* good : {"tasks", "tasks@1", "vector@316228", "unroll@2147483648"}) {
    CHECK_MESSAGE(is_valid_schedule_param_key(good), good);
  }
  for (const char* bad : {"", "tasks@", "tasks@0", "tasks@0123", "tasks@1e6", "@100", "9a@100",
                          "tasks@12345678901", "tasks@-5", "tasks@100@200"}) {
    CHECK_FALSE_MESSAGE(is_valid_schedule_param_key(bad), bad);
  }
}

TEST_CASE("is_safe_relative_path") {
  for (const char* good : {"a", "kernels/x.so", "ops/apply_adam-f32.json", "a/b/c", "x.y.z",
                           ".hidden", "a/..b", "...", "lib/libopforge_halide_runtime.so"}) {
    CHECK_MESSAGE(is_safe_relative_path(good), good);
  }
  for (const char* bad :
       {"",    "../x", "..", ".",   "a/../b", "a/..", "/abs", "/",    "./a",  "a/./b",
        "a/.", "a//b", "a/", "a b", "a\\b",   "~/x",  "a:b",  "C:/x", "a\tb", "k\xc3\xa9.so"}) {
    CHECK_FALSE_MESSAGE(is_safe_relative_path(bad), bad);
  }
  CHECK(is_safe_relative_path(std::string(255, 'a')));
  CHECK_FALSE(is_safe_relative_path(std::string(256, 'a')));
  CHECK_FALSE(is_safe_relative_path(std::string("a\0b", 3)));
}

TEST_CASE("canonical_attr_value: user text to the canonical form, or a clear error") {
  using opforge::registry::Attr;
  using opforge::registry::canonical_attr_value;
  CHECK(canonical_attr_value(Attr::Type::boolean, {}, "1") == "true");
  CHECK(canonical_attr_value(Attr::Type::boolean, {}, "False") == "false");
  CHECK(canonical_attr_value(Attr::Type::integer, {}, "007") == "7");
  CHECK(canonical_attr_value(Attr::Type::real, {}, "0.1") == "0.10000000000000001");
  CHECK(canonical_attr_value(Attr::Type::string, {"tf", "torch"}, "torch") == "torch");
  CHECK_THROWS_WITH_AS(canonical_attr_value(Attr::Type::boolean, {}, "maybe"),
                       "expected true or false, got 'maybe'", std::invalid_argument);
  CHECK_THROWS_AS(canonical_attr_value(Attr::Type::integer, {}, "1.5"), std::invalid_argument);
  CHECK_THROWS_AS(canonical_attr_value(Attr::Type::real, {}, "inf"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(canonical_attr_value(Attr::Type::string, {"tf", "torch"}, "keras"),
                       "expected one of tf, torch, got 'keras'", std::invalid_argument);
}
