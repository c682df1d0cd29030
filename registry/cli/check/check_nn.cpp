#include "registry/cli/check/check_nn.h"

#include <cstdio>
#include <sstream>

#include "registry/cli/check/golden_check.h"
#include "registry/cli/check/nn_problem.h"

namespace opforge::cli::check {

namespace {

using nn_golden::NnProblem;

// The descriptor's example ("x=4096,1024 gamma=1024 eps=1e-05") as a problem.
NnProblem example_problem(const registry::Descriptor& d) {
  NnProblem p;
  for (const auto& [k, v] : d.attr_values()) p.attrs[k] = v;  // the variant's own
  std::stringstream ss(d.cost.example);
  std::string tok;
  while (ss >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = tok.substr(0, eq), value = tok.substr(eq + 1);
    const registry::Input* in = d.find_input(name);
    if (!in) continue;
    if (in->role == registry::Input::Role::scalar) {
      p.scalars[name] = std::stod(value);
      continue;
    }
    std::stringstream dims(value);
    std::string dim;
    while (std::getline(dims, dim, ',')) p.shapes[name].push_back(std::stoll(dim));
  }
  return p;
}

// A reference problem with each named dim redrawn (the same value wherever the name appears):
// uniform in [max(1, v/2), 3v/2 + 1]. Empty when a tensor's rank does not fit its names.
NnProblem redrawn(const registry::Descriptor& d, const NnProblem& base, std::mt19937& rng) {
  std::map<std::string, int64_t> value;
  for (const auto& in : d.inputs) {
    auto it = base.shapes.find(in.name);
    if (it == base.shapes.end() || in.dims.empty()) continue;
    const auto& shape = it->second;
    const size_t skip = in.dims.size() - shape.size();  // an absent leading "B?"
    if (skip > 1) return {};
    for (size_t k = 0; k < shape.size(); ++k) value.emplace(in.dims[k + skip], shape[k]);
  }
  for (auto& [name, v] : value) {
    std::uniform_int_distribution<int64_t> draw(std::max<int64_t>(1, v / 2), v + v / 2 + 1);
    v = draw(rng);
  }
  NnProblem p = base;
  for (const auto& in : d.inputs) {
    auto it = p.shapes.find(in.name);
    if (it == p.shapes.end() || in.dims.empty()) continue;
    const size_t skip = in.dims.size() - it->second.size();
    for (size_t k = 0; k < it->second.size(); ++k) it->second[k] = value.at(in.dims[k + skip]);
  }
  return p;
}

// Up to `count` random problems the variant accepts (the runtime's checks hold, its algorithm
// applies), each at most 2^21 input elements so the fp64 reference stays quick.
std::vector<NnProblem> random_problems(Kernel& k, const std::vector<NnProblem>& base, int count,
                                       unsigned seed) {
  std::vector<NnProblem> out;
  if (base.empty()) return out;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, base.size() - 1);
  for (int attempt = 0; attempt < 50 * count && static_cast<int>(out.size()) < count; ++attempt) {
    NnProblem p = redrawn(k.descriptor(), base[pick(rng)], rng);
    if (p.shapes.empty()) continue;
    int64_t total = 0;
    for (const auto& [name, shape] : p.shapes) total += nn_golden::elements(shape);
    if (total > (int64_t{1} << 21)) continue;
    try {
      std::vector<Tensor> probe;  // shapes only: output_shapes evaluates every check
      for (const auto& [name, shape] : p.shapes)
        probe.push_back({name, nullptr, k.descriptor().find_input(name)->dtype, shape});
      k.output_shapes(probe, p.scalars);
    } catch (const Error&) {
      continue;  // shapes the op's checks refuse
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

nlohmann::json check_nn(Kernel& k, bool with_example, int random_shapes, unsigned seed) {
  const registry::Descriptor& d = k.descriptor();
  const nn_golden::NnReference* ref = nn_golden::find_nn_reference(d.op);
  if (!ref) throw Error("op '" + d.op + "' has no fp64 reference (registry/builder/nn_golden)");
  std::vector<std::pair<NnProblem, std::string>> problems;
  std::vector<NnProblem> matching;
  for (const auto& p : ref->problems) {
    if (nn_golden::attrs_match(d, p.attrs)) matching.push_back(p);
  }
  for (const auto& p : matching) problems.emplace_back(p, "problem");
  for (const auto& p : random_problems(k, matching, random_shapes, seed))
    problems.emplace_back(p, "random");
  if (with_example && !d.cost.example.empty()) problems.emplace_back(example_problem(d), "example");
  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, builder::GoldenErrors> outputs;
  double worst = 0;
  std::string worst_at;
  int ran = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto& [p, what] = problems[i];
    const nn_golden::NnProblemCheck c =
        nn_golden::check_problem(k, *ref, p, static_cast<unsigned>(1000 + i));
    if (!c.applied) continue;
    ++ran;
    rows.push_back({{"shapes", nn_golden::shapes_text(p.shapes, p.scalars)},
                    {"kind", what},
                    {"worst", c.worst},
                    {"rtol", c.rtol},
                    {"atol", c.atol}});
    for (const auto& [name, e] : c.outputs) {
      builder::GoldenErrors& t = outputs[name];
      t.max_abs = std::max(t.max_abs, e.max_abs);
      t.max_rel = std::max(t.max_rel, e.max_rel);
      t.max_ulp = std::max(t.max_ulp, e.max_ulp);
      t.exceeding += e.exceeding;
      t.elements += e.elements;
    }
    if (!(c.worst <= worst)) worst = c.worst, worst_at = c.worst_at;
  }
  nlohmann::json states = nlohmann::json::object();
  for (const auto& [name, e] : outputs) states[name] = errors_json(e);
  return {{"op", d.op},
          {"variant", d.variant},
          {"problems", rows},
          {"ran", ran},
          {"worst", worst},
          {"worst_at", worst_at},
          {"states", states},
          // A variant no problem applies to is unchecked, not passed.
          {"ok", ran > 0 && worst <= 1.0}};
}

void print_nn_report(const nlohmann::json& r) {
  std::printf("%s vs its fp64 reference on %d problems (|err| <= atol + rtol*|ref| each)\n",
              r["variant"].get<std::string>().c_str(), r["ran"].get<int>());
  if (r.contains("set"))
    std::printf("  preview with %s (not the registered schedule)\n",
                r["set"].get<std::string>().c_str());
  for (const auto& p : r["problems"]) {
    std::printf("  %-7s %-60s worst %.3gx of the bound (rtol %g, atol %g)\n",
                p["kind"].get<std::string>().c_str(), p["shapes"].get<std::string>().c_str(),
                p["worst"].get<double>(), p["rtol"].get<double>(), p["atol"].get<double>());
  }
  print_errors_table("output", r["states"]);
  if (r["ran"].get<int>() == 0) {
    std::printf("FAILED: no reference problem applies to this variant\n");
  } else if (r["ok"].get<bool>()) {
    std::printf("ok: within tolerance\n");
  } else {
    std::printf("FAILED: %.3gx of the bound at %s\n", r["worst"].get<double>(),
                r["worst_at"].get<std::string>().c_str());
  }
}

}  // namespace opforge::cli::check
