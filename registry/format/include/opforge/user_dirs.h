// Where opforge keeps per-user files: the compile cache and the user registry. Here, in the
// leaf both sides read, because the builder writes them and the runtime reads the user
// registry: one definition keeps the two from disagreeing.
#pragma once

#include <string>

namespace opforge::registry {

// The compile cache's root: $OPFORGE_CACHE_DIR, else $XDG_CACHE_HOME/opforge (an absolute
// XDG_CACHE_HOME only, as the XDG spec says), else $HOME/.cache/opforge. Throws
// std::runtime_error when none is set.
std::string cache_root();

// The user registry: the ops built from rule files on the fly (`opforge build --user`,
// `opforge run/check/bench --rules`, Python's opforge.rule), read by the runtime beside the
// op library. $OPFORGE_USER_REGISTRY, else <cache_root()>/user-registry. "" when neither can
// be determined (no HOME): then there is no user registry.
std::string user_registry_dir();

}  // namespace opforge::registry
