// opforge check --replay DIR: every call a precision dump holds (runtime/call_dump.h: written
// by `opforge run --dump`, Python's dump_dir=, or $OPFORGE_DUMP_DIR) re-run through the fp64
// golden of its declaration (NN ops: their fp64 reference) from the dumped inputs, and the dumped
// outputs judged against it with the dumped descriptor's tolerance: per call and per output the max
// abs/rel/ulp error, and the first call past its bound. Exit 1 when any call exceeds it or cannot
// be read.
#pragma once

#include "registry/cli/args.h"

namespace opforge::cli::check {

int replay(const Args& a);

}  // namespace opforge::cli::check
