#include "registry/cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "opforge/suggest.hpp"

namespace opforge::cli {

std::string Args::get(const std::string& o, const std::string& def) const {
  auto it = values.find(o);
  return it == values.end() || it->second.empty() ? def : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& o) const {
  static const std::vector<std::string> none;
  auto it = values.find(o);
  return it == values.end() ? none : it->second;
}

int64_t Args::get_int(const std::string& o, int64_t def, int64_t lo, int64_t hi) const {
  const int64_t v = get_int(o, def);
  if (has(o) && (v < lo || v > hi)) {
    throw UsageError("--" + o + ": " + std::to_string(v) + " is outside [" + std::to_string(lo) +
                     ", " + std::to_string(hi) + "]");
  }
  return v;
}

int64_t Args::get_int(const std::string& o, int64_t def) const {
  if (!has(o)) return def;
  const std::string s = get(o);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);  // accepts 1e6
  if (s.empty() || *end || std::isnan(v)) {
    throw UsageError("--" + o + ": expected an integer, got '" + s + "'");
  }
  // Beyond int64 (1e99, inf): a range error, not "not an integer" (and no undefined cast).
  if (std::isinf(v) || std::fabs(v) >= 9.2e18) {
    throw UsageError("--" + o + ": " + s + " is too large (at most about 9.2e18)");
  }
  // ERANGE here is an underflow (1e-400): not an integer either.
  if (errno == ERANGE || v != std::trunc(v)) {
    throw UsageError("--" + o + ": expected an integer, got '" + s + "'");
  }
  return static_cast<int64_t>(v);
}

void Args::at_most_one_of(const std::vector<const char*>& names) const {
  std::vector<std::string> given;
  for (const char* o : names) {
    if (has(o)) given.push_back(std::string("--") + o);
  }
  if (given.size() < 2) return;
  std::string list;
  for (size_t k = 0; k < given.size(); ++k) {
    list += (k == 0 ? "" : k + 1 == given.size() ? " and " : ", ") + given[k];
  }
  throw UsageError(list + " each ask for a different output: give one");
}

Args parse(const CommandSpec& spec, int argc, char** argv, int first) {
  Args a;
  for (int k = first; k < argc; ++k) {
    std::string t = argv[k];
    if (t == "--help" || t == "-h") {
      a.values["help"].push_back("");
      continue;
    }
    if (t.rfind("--", 0) != 0) {
      a.positional.push_back(t);
      continue;
    }
    std::string name = t.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const OptionSpec* o = nullptr;
    std::vector<std::string> names;
    for (const auto& s : spec.options) {
      names.push_back(s.name);
      if (s.name == name) o = &s;
    }
    if (!o) {
      throw UsageError("unknown option --" + name + did_you_mean(name, names));
    }
    if (!o->value_name.empty() && !inline_value) {
      if (k + 1 >= argc) throw UsageError("--" + name + " needs a value " + o->value_name);
      value = argv[++k];
    }
    if (o->value_name.empty() && inline_value) throw UsageError("--" + name + " takes no value");
    // An empty value is never meant: `--registry ""` used to build into /.
    if (!o->value_name.empty() && value.empty())
      throw UsageError("--" + name + " needs a non-empty " + o->value_name);
    if (!o->repeated && a.values.count(name)) throw UsageError("--" + name + " given twice");
    a.values[name].push_back(value);
  }
  if (a.has("help")) return a;
  for (const auto& o : spec.options) {
    if (o.standalone && a.has(o.name) && a.positional.empty()) return a;
  }
  // "OP" is one required word, "A [B]" one required and one optional, "[OP...]" any number.
  size_t required = 0, most = 0;
  bool variadic = false;
  std::istringstream words(spec.positional);
  for (std::string w; words >> w; ++most) {
    required += w.front() != '[';
    variadic = variadic || w.find("...") != std::string::npos;
  }
  if (a.positional.size() < required || (!variadic && a.positional.size() > most)) {
    throw UsageError(
        "expected " + (most ? spec.positional : std::string("no positional argument")) +
        (a.positional.size() > most ? ", got extra '" + a.positional.back() + "'" : ""));
  }
  return a;
}

std::string help_text(const CommandSpec& spec) {
  std::string s = "usage: opforge " + spec.name;
  if (!spec.positional.empty()) s += " " + spec.positional;
  s += " [options]\n\n" + spec.summary + "\n\noptions:\n";
  for (const auto& o : spec.options) {
    std::string left = "  --" + o.name + (o.value_name.empty() ? "" : " " + o.value_name);
    if (left.size() < 28) left.resize(28, ' ');
    s += left + " " + o.help + (o.repeated ? " (repeatable)" : "") + "\n";
  }
  return s + "  --help                     this text\n";
}

std::map<std::string, std::string> attr_options(const Args& a) {
  std::map<std::string, std::string> out;
  for (const auto& s : a.all("attr")) {
    auto [name, value] = split_assignment(s, "attr");
    if (!out.emplace(name, value).second) throw UsageError("--attr " + name + " given twice");
  }
  return out;
}

std::map<std::string, double> scalar_options(const Args& a) {
  std::map<std::string, double> out;
  for (const auto& s : a.all("scalar")) {
    auto [name, text] = split_assignment(s, "scalar");
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || errno == ERANGE) {
      throw UsageError("--scalar " + name + "=" + text + ": not a number");
    }
    if (!out.emplace(name, v).second) throw UsageError("--scalar " + name + " given twice");
  }
  return out;
}

std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& option) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw UsageError("--" + option + " " + text + ": expected NAME=VALUE");
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

}  // namespace opforge::cli
