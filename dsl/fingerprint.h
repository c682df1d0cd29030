// SHA-256 over the dsl/ sources this binary was built from (generated at build time).
#pragma once

namespace opforge::dsl {
const char* sources_fingerprint();
}
