// The lowered Halide IR (stmt text) of a pipeline for the host, for tests that look for what a
// schedule or a lowering pass put into it.
#pragma once

#include <Halide.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace opforge::dsl::testing {

inline std::string lowered_stmt(Halide::Pipeline p, const std::vector<Halide::Argument>& args) {
  char path[] = "/tmp/opforge-test-stmt-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  p.compile_to_lowered_stmt(path, args, Halide::Text, Halide::get_host_target());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(path);
  return ss.str();
}

}  // namespace opforge::dsl::testing
