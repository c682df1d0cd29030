// Work spread over threads, as the builder compiles: each worker takes the next index.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace opforge::builder {

// Runs work(k) for every k in [0, count) on up to `jobs` threads (0: one per hardware thread),
// the calling thread among them. Returns, once all have finished, each index's error: the
// what() of what work(k) threw, empty where it returned.
std::vector<std::string> run_on_workers(size_t count, int jobs,
                                        const std::function<void(size_t)>& work);

}  // namespace opforge::builder
