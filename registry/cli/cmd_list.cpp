// opforge list: what the registry holds, from its descriptors.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "opforge/runtime.hpp"
#include "registry/cli/commands.h"
#include "registry/cli/text.h"

namespace opforge::cli {

int cmd_list(const Args& a) {
  a.at_most_one_of({"names", "json", "markdown"});
  auto reg = Registry::open(registry_dir(a));
  if (a.has("names")) {  // for shell completion
    for (const auto& op : reg->ops()) std::printf("%s\n", op.c_str());
    return 0;
  }
  if (a.has("json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : reg->index().variants) {
      j.push_back({{"op", e.op},
                   {"variant", e.variant},
                   {"isa", e.isa},
                   {"attrs", e.attrs},
                   {"descriptor", e.descriptor}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (a.has("markdown")) {
    // generators/README.md's op table, generated from the descriptors (one declaration per op).
    std::printf("| op | arguments | matches | attrs (default first) | what it does |\n");
    std::printf("|---|---|---|---|---|\n");
    const std::vector<std::string> user = reg->user_ops();  // not the library's
    for (const auto& op : reg->ops()) {
      if (std::find(user.begin(), user.end(), op) != user.end()) continue;
      auto vs = reg->variants(op);
      const registry::Descriptor& d = vs.front();
      if (d.kind != "optimizer") continue;
      std::vector<std::string> args, attrs;
      std::map<std::string, std::set<std::string>> values;
      for (const auto& v : vs) {
        for (const auto& at : v.attrs) values[at.name].insert(at.value);
      }
      for (const auto& in : d.inputs) args.push_back(in.name);
      for (const auto& at : d.attrs) {
        std::vector<std::string> vals = {at.default_value};
        for (const auto& x : values[at.name]) {
          if (x != at.default_value) vals.push_back(x);
        }
        attrs.push_back("`" + at.name + "` " + join(vals, "/"));
      }
      std::printf("| `%s` | %s | %s | %s | %s |\n", op.c_str(), join(args).c_str(),
                  d.reference.c_str(), attrs.empty() ? "-" : join(attrs).c_str(),
                  d.summary.c_str());
    }
    return 0;
  }
  const std::string host = host_summary();  // first: a bad OPFORGE_CPU_FEATURES fails before output
  std::vector<std::vector<std::string>> rows = {{"op", "kind", "isas", "attrs", "summary"}};
  for (const auto& op : reg->ops()) {
    auto vs = reg->variants(op);
    std::set<std::string> isas;
    std::map<std::string, std::set<std::string>> values;  // attr -> values some variant has
    for (const auto& d : vs) {
      isas.insert(d.target.isa);
      for (const auto& [k, v] : d.attr_values()) values[k].insert(v);
    }
    std::vector<std::string> attrs;
    for (const auto& [k, v] : values) attrs.push_back(k + "=" + join({v.begin(), v.end()}, "/"));
    rows.push_back({op, vs[0].kind, join({isas.begin(), isas.end()}, ","),
                    attrs.empty() ? "-" : join(attrs, " "), vs[0].summary});
  }
  std::vector<size_t> width(4, 0);
  for (const auto& r : rows) {
    for (size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  for (const auto& r : rows) {
    for (size_t c = 0; c < width.size(); ++c) std::printf("%-*s  ", int(width[c]), r[c].c_str());
    std::printf("%s\n", r.back().c_str());
  }
  std::printf("%zu variants in %s\n", reg->index().variants.size(), reg->dir().c_str());
  if (const std::vector<std::string> user = reg->user_ops(); !user.empty()) {
    std::printf("from the user registry %s: %s\n", reg->user_dir().c_str(), join(user).c_str());
  }
  std::printf("%s\n", host.c_str());  // what variant selection sees here
  return 0;
}

Command list_command() {
  return {{"list",
           "",
           "List the registry's ops and variants",
           {registry_option(),
            json_option(),
            {"markdown", "", "the op table of generators/README.md"},
            {"names", "", "op names only, one a line (for shell completion)"}}},
          cmd_list};
}

}  // namespace opforge::cli
