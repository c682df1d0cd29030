// Looking up a pipeline's Func by name, for the checked-in Adams2019 schedule files
// (generators/schedules/). Halide's emitter names Funcs by their index in the pipeline's
// function list (pipeline.get_func(4)), which shifts whenever the algorithm gains or loses a
// Func; `opforge autoschedule` rewrites those lookups to name the Func they mean.
#pragma once

#include <Halide.h>

#include <stdexcept>
#include <string>

namespace opforge::generators {

// The Func of `pipeline` named exactly `name`: an output or a Func an output calls. Throws
// std::runtime_error naming it when there is none (a schedule file for another algorithm).
inline Halide::Func pipeline_func(const Halide::Pipeline& pipeline, const std::string& name) {
  for (const Halide::Func& out : pipeline.outputs()) {
    for (const auto& [n, f] : Halide::Internal::find_transitive_calls(out.function())) {
      if (n == name) return Halide::Func(f);
    }
  }
  throw std::runtime_error("schedule file: the pipeline has no Func '" + name +
                           "' (regenerate it with `opforge autoschedule`)");
}

}  // namespace opforge::generators
