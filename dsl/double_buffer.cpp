#include "dsl/double_buffer.h"

#include <stdexcept>

namespace opforge::dsl {

namespace {

bool has_prefetch(const Halide::Func& f) {
  const Halide::Internal::Function fn = f.function();
  if (!fn.definition().schedule().prefetches().empty()) return true;
  for (const auto& u : fn.updates()) {
    if (!u.schedule().prefetches().empty()) return true;
  }
  return false;
}

}  // namespace

void double_buffer(Halide::Func staged, const Halide::Func& consumer, const Halide::Var& outer,
                   const Halide::Var& block, const Halide::Var& dim, int grain, int vector,
                   bool async) {
  double_buffer(staged, consumer, Halide::LoopLevel(consumer, outer),
                Halide::LoopLevel(consumer, block), dim, grain, vector, async);
}

void double_buffer(Halide::Func staged, const Halide::Func& consumer,
                   const Halide::LoopLevel& store, const Halide::LoopLevel& compute,
                   const Halide::Var& dim, int grain, int vector, bool async) {
  // Folded along the vectorized dim, a slot holds at least one vector.
  const bool along_vectors = dim.name() == staged.args()[0].name();
  if (grain < 1 || (along_vectors && grain < vector)) {
    throw std::invalid_argument(
        "double_buffer(" + staged.name() + "): grain " + std::to_string(grain) +
        " must be at least 1" +
        (along_vectors ? " and one vector (" + std::to_string(vector) + ")" : std::string()));
  }
  if (has_prefetch(consumer)) {
    throw std::invalid_argument("double_buffer(" + staged.name() + "): consumer " +
                                consumer.name() +
                                " has a prefetch directive; async() with prefetch() hangs in "
                                "Halide 14 (drop one of them)");
  }
  staged.store_at(store).compute_at(compute).fold_storage(dim, 2 * grain);
  if (vector > 0) staged.vectorize(staged.args()[0], vector, Halide::TailStrategy::GuardWithIf);
  if (async) staged.async();
}

std::string double_buffer_summary(const std::string& what, int grain, const std::string& unit,
                                  bool async) {
  return (async ? "double-buffered " : "staged ") + what + " (2 slots of " + std::to_string(grain) +
         " " + unit + (async ? ", async)" : ", synchronous)");
}

}  // namespace opforge::dsl
