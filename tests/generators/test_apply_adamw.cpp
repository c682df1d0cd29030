// Reference: torch.optim.AdamW (_single_tensor_adamw, torch 1.13 / 2.x), with the CANN
// ApplyAdamW convention for the step as an alternative:
//   g = maximize ? -grad : grad
//   var *= 1 - lr * weight_decay                        (decoupled decay, on the old var)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   amsgrad: v_max = max(v_max, v) (torch.maximum: NaN kept); the denominator uses v_max (raw,
//     not bias-corrected)
//   beta1^t, beta2^t: t = step (convention torch), or beta1_power * beta1 and
//     beta2_power * beta2 (convention cann: the inputs are beta^(t-1))
//   bc1 = 1 - beta1^t, bc2 = 1 - beta2^t
//   epsilon_mode torch: var -= (lr / bc1) * m / (sqrt(vv) / sqrt(bc2) + epsilon)
//   epsilon_mode tf:    var -= (lr * sqrt(bc2) / bc1) * m / (sqrt(vv) + epsilon)

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "generators/reference.h"
#include "opforge/runtime.hpp"
#include "test_registry.h"

namespace opforge::testing {
namespace {

void adamw_update(const Attrs& a, const Scalars& s, Tensors& t) {
  const bool amsgrad = a.at("amsgrad") == "true", maximize = a.at("maximize") == "true";
  const bool cann = a.at("convention") == "cann", eps_tf = a.at("epsilon_mode") == "tf";
  const double lr = s.at("lr"), b1 = s.at("beta1"), b2 = s.at("beta2"), eps = s.at("epsilon"),
               wd = s.at("weight_decay");
  double b1t, b2t;
  if (cann) {
    b1t = s.at("beta1_power") * b1;
    b2t = s.at("beta2_power") * b2;
  } else {
    b1t = std::pow(b1, s.at("step"));
    b2t = std::pow(b2, s.at("step"));
  }
  const double bc1 = 1 - b1t, bc2 = 1 - b2t;
  std::vector<double>& var = t.at("var");
  std::vector<double>& m = t.at("m");
  std::vector<double>& v = t.at("v");
  std::vector<double>& grad = t.at("grad");
  std::vector<double>* v_max = amsgrad ? &t.at("v_max") : nullptr;
  for (size_t i = 0; i < var.size(); ++i) {
    const double g = maximize ? -grad[i] : grad[i];
    double p = var[i] * (1 - lr * wd);
    m[i] = b1 * m[i] + (1 - b1) * g;
    v[i] = b2 * v[i] + (1 - b2) * g * g;
    double vv = v[i];
    if (amsgrad) vv = (*v_max)[i] = nan_max((*v_max)[i], v[i]);
    if (eps_tf) {
      p -= (lr * std::sqrt(bc2) / bc1) * m[i] / (std::sqrt(vv) + eps);
    } else {
      p -= (lr / bc1) * m[i] / (std::sqrt(vv) / std::sqrt(bc2) + eps);
    }
    var[i] = p;
  }
}

void adamw_inputs(std::mt19937& rng, size_t n, const Attrs& a, Tensors& t, Scalars& s) {
  t["var"] = uniform(rng, n, -1, 1);
  t["m"] = uniform(rng, n, -0.1, 0.1);
  t["v"] = uniform(rng, n, 0, 0.01);
  // About half of v_max lies above the new v, half below.
  if (a.at("amsgrad") == "true") t["v_max"] = uniform(rng, n, 0, 0.02);
  t["grad"] = uniform(rng, n, -1, 1);
  const double beta1 = uniform(rng, 1, 0.8, 0.95)[0], beta2 = uniform(rng, 1, 0.99, 0.999)[0];
  const int step = std::uniform_int_distribution<int>(1, 1000)(rng);
  s["lr"] = uniform(rng, 1, 1e-4, 1e-2)[0];
  s["beta1"] = beta1;
  s["beta2"] = beta2;
  s["epsilon"] = static_cast<float>(1e-8);
  s["weight_decay"] = uniform(rng, 1, 0, 0.1)[0];
  if (a.at("convention") == "cann") {
    s["beta1_power"] = static_cast<float>(std::pow(beta1, step - 1));
    s["beta2_power"] = static_cast<float>(std::pow(beta2, step - 1));
  } else {
    s["step"] = step;
  }
}

const RegisterReference reg("apply_adamw", {adamw_inputs, adamw_update});

// One torch.optim.AdamW step (foreach=False, fp64) on the same inputs, for every
// amsgrad/maximize combination, against the kernel (convention torch, epsilon_mode torch)
// with the op's tolerance, and against this file's reference (to ~1e-12).
TEST_CASE("apply_adamw: one step matches torch.optim.AdamW") {
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0) {
    MESSAGE("skipped: /usr/bin/python3 cannot import torch and numpy");
    return;
  }
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() /
      ("opforge_adamw_torch_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{dir};

  const size_t n = 4099;
  std::mt19937 rng(20240607);
  Tensors in;
  Scalars s;
  adamw_inputs(rng, n, {{"amsgrad", "true"}, {"convention", "torch"}}, in, s);
  s["step"] = 7;  // a small step: the bias corrections matter
  // Raw little-endian arrays (numpy tofile/fromfile).
  for (const auto& [name, v] : in) {
    const std::vector<float> f(v.begin(), v.end());
    std::ofstream(dir / (name + ".f32"), std::ios::binary)
        .write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(n * 4));
  }
  auto num = [](double x) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", x);
    return std::string(b);
  };
  std::ofstream(dir / "adamw.py")
      << "import numpy as np, torch\n"
         "d = '"
      << dir.string()
      << "/'\n"
         "ld = lambda k: torch.from_numpy(np.fromfile(d + k + '.f32', '<f4').astype('<f8'))\n"
         "for ams in (False, True):\n"
         "  for mx in (False, True):\n"
         "    p = ld('var').clone().requires_grad_(False)\n"
         "    p.grad = ld('grad')\n"
         "    opt = torch.optim.AdamW([p], lr="
      << num(s["lr"]) << ", betas=(" << num(s["beta1"]) << ", " << num(s["beta2"])
      << "), eps=" << num(s["epsilon"]) << ", weight_decay=" << num(s["weight_decay"])
      << ", amsgrad=ams, maximize=mx, foreach=False)\n"
         "    st = {'step': torch.tensor("
      << num(s["step"] - 1)
      << "), 'exp_avg': ld('m'), 'exp_avg_sq': ld('v')}\n"
         "    if ams: st['max_exp_avg_sq'] = ld('v_max')\n"
         "    opt.state[p] = st\n"
         "    opt.step()\n"
         "    tag = '_%d%d' % (ams, mx)\n"
         "    p.detach().numpy().astype('<f8').tofile(d + 'out_var' + tag + '.f64')\n"
         "    st['exp_avg'].numpy().astype('<f8').tofile(d + 'out_m' + tag + '.f64')\n"
         "    st['exp_avg_sq'].numpy().astype('<f8').tofile(d + 'out_v' + tag + '.f64')\n"
         "    if ams: st['max_exp_avg_sq'].numpy().astype('<f8').tofile(d + 'out_v_max' + tag + "
         "'.f64')\n";
  const std::string cmd = "/usr/bin/python3 '" + (dir / "adamw.py").string() + "' > '" +
                          (dir / "log").string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir / "log");
    std::stringstream ss;
    ss << log.rdbuf();
    FAIL("torch script failed: " << ss.str());
  }

  auto reg = Registry::open(test_registry_dir());
  for (const bool ams : {false, true}) {
    for (const bool mx : {false, true}) {
      const Attrs attrs = {{"amsgrad", ams ? "true" : "false"},
                           {"maximize", mx ? "true" : "false"},
                           {"convention", "torch"},
                           {"epsilon_mode", "torch"}};
      CAPTURE(ams);
      CAPTURE(mx);
      const std::string tag = std::string("_") + (ams ? "1" : "0") + (mx ? "1" : "0");
      Tensors mine = in;
      if (!ams) mine.erase("v_max");
      adamw_update(attrs, s, mine);
      for (const std::string& isa : runnable_isas()) {
        CAPTURE(isa);
        Kernel& k = reg->select("apply_adamw", attrs, isa);
        double worst = 0;
        std::string worst_at;
        const registry::Tolerance tol = k.descriptor().tolerance;
        std::map<std::string, std::vector<float>> f32;
        std::vector<Tensor> tensors;
        for (const auto& [name, v] : mine) f32[name].assign(in.at(name).begin(), in.at(name).end());
        for (auto& [name, v] : f32) {
          tensors.push_back({name, v.data(), registry::DType::f32, {static_cast<int64_t>(n)}});
        }
        k.call(tensors, s);
        for (const auto& entry : f32) {
          const std::string name = entry.first;
          const std::vector<float>& got = entry.second;
          if (name == "grad") continue;
          CAPTURE(name);
          const fs::path out = dir / ("out_" + name + tag + ".f64");
          REQUIRE(fs::file_size(out) == n * sizeof(double));
          std::vector<double> want(n);
          std::ifstream(out, std::ios::binary)
              .read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(n * 8));
          for (size_t i = 0; i < n; ++i) {
            CAPTURE(i);
            const double err = std::fabs(got[i] - want[i]);
            const double allowed = tol.atol + tol.rtol * std::fabs(want[i]);
            if (err / allowed > worst) {
              worst = err / allowed;
              worst_at = name + "[" + std::to_string(i) + "]";
            }
            if (!(err <= allowed)) FAIL_CHECK(got[i] << " vs torch " << want[i]);
            // This file's reference agrees with torch (both fp64).
            if (!(std::fabs(mine.at(name)[i] - want[i]) <= 1e-12 * (1 + std::fabs(want[i])))) {
              FAIL_CHECK("reference " << mine.at(name)[i] << " vs torch " << want[i]);
            }
          }
        }
        MESSAGE("apply_adamw vs torch.optim.AdamW, " << isa << " amsgrad=" << ams
                                                     << " maximize=" << mx << ": worst " << worst
                                                     << "x of tolerance at " << worst_at);
      }
    }
  }
}

}  // namespace
}  // namespace opforge::testing
