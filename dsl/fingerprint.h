// SHA-256 over the dsl/ sources this binary was built from (generated at build time).
#pragma once

namespace opforge::dsl {
const char* sources_fingerprint();
}

namespace opforge::generators {
// SHA-256 over the NN op sources (generators/nn_*.cpp, whose hand schedules are not otherwise
// in a kernel's key: an edited schedule must recompile its kernels).
const char* nn_sources_fingerprint();
}  // namespace opforge::generators
