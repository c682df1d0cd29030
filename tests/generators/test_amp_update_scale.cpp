// Reference: torch.cuda.amp.GradScaler.update (aten::_amp_update_scale_, CUDA kernel
// amp_update_scale_cuda_kernel), per element:
//   if found_inf (nonzero or NaN): scale = float(scale * backoff_factor); growth_tracker = 0
//   else: successful = growth_tracker + 1
//         if successful == growth_interval:
//           new_scale = float(scale * growth_factor); if isfinite(new_scale): scale = new_scale
//           growth_tracker = 0
//         else: growth_tracker = successful
#include <cmath>
#include <limits>

#include "generators/reference.h"

namespace opforge::testing {
namespace {

const RegisterReference reg(
    "amp_update_scale",
    {[](std::mt19937& rng, size_t n, const Attrs&, Tensors& t, Scalars& s) {
       const int64_t interval = std::uniform_int_distribution<int64_t>(1, 6)(rng);
       std::vector<double> scale(n), tracker(n), found(n);
       std::uniform_int_distribution<int> pick(0, 9);
       for (size_t i = 0; i < n; ++i) {
         // Powers of two (what GradScaler holds), arbitrary values, and values whose growth
         // overflows fp32 (the new scale is then not finite and the old one stays).
         const int kind = pick(rng);
         scale[i] = kind < 5   ? std::ldexp(1.0, std::uniform_int_distribution<int>(-20, 24)(rng))
                    : kind < 8 ? uniform(rng, 1, 1e-3, 1e6)[0]
                               : static_cast<double>(std::numeric_limits<float>::max()) /
                                     uniform(rng, 1, 1.0, 1.9)[0];
         scale[i] = static_cast<float>(scale[i]);
         // Trackers at interval - 1 half the time, so growth happens often.
         tracker[i] = pick(rng) < 5
                          ? double(interval - 1)
                          : double(std::uniform_int_distribution<int64_t>(0, interval - 1)(rng));
         const int f = pick(rng);
         found[i] = f < 6    ? 0.0
                    : f == 6 ? 1.0
                    : f == 7 ? std::numeric_limits<double>::quiet_NaN()
                    : f == 8 ? std::numeric_limits<double>::infinity()
                             : -0.0;  // negative zero is "no inf found"
       }
       t["scale"] = scale;
       t["growth_tracker"] = tracker;
       t["found_inf"] = found;
       s["growth_factor"] = pick(rng) < 5 ? 2.0 : 1.5;
       s["backoff_factor"] = pick(rng) < 5 ? 0.5 : 0.25;
       s["growth_interval"] = static_cast<double>(interval);
     },
     [](const Attrs&, const Scalars& s, Tensors& t) {
       std::vector<double>& scale = t.at("scale");
       std::vector<double>& tracker = t.at("growth_tracker");
       const std::vector<double>& found = t.at("found_inf");
       for (size_t i = 0; i < scale.size(); ++i) {
         if (found[i] != 0 || std::isnan(found[i])) {
           scale[i] = static_cast<float>(scale[i] * s.at("backoff_factor"));
           tracker[i] = 0;
           continue;
         }
         const double successful = tracker[i] + 1;
         if (successful == s.at("growth_interval")) {
           const float grown = static_cast<float>(scale[i] * s.at("growth_factor"));
           if (std::isfinite(grown)) scale[i] = grown;
           tracker[i] = 0;
         } else {
           tracker[i] = successful;
         }
       }
     }});

}  // namespace
}  // namespace opforge::testing
