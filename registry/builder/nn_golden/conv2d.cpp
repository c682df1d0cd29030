// conv2d and conv2d_bias_relu: an fp64 loop written from torch.nn.functional.conv2d's
// definition (NCHW, zero padding, stride, dilation, groups); the check
// (registry/cli/check/nn_problem.h) runs every algorithm (direct, direct_oc, direct_oc_unpadded,
// direct_oc_small, direct_oc_small_8, direct_oc_small_8_16x16, direct_oc_small_14x14,
// direct_oc_blocked, gemm_1x1, gemm_1x1_small, gemm_1x1_small_16, gemm_1x1_images, gemm_1x1_s2,
// gemm_1x1_s2_small, gemm_1x1_s2_images, gemm_3x3, winograd, depthwise) of both ops on every
// problem it applies to: 1x1 spatial, channels not a multiple of 16, batch 1 and 2, groups,
// stride 1 to 3, dilation, padding 0 to 2, non-square filters.
#include <algorithm>

#include "registry/builder/nn_golden/add_references.h"

namespace opforge::nn_golden {
namespace {

struct Conv {
  int64_t n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
};

NnProblem problem(const Conv& v, bool bias) {
  NnProblem p;
  p.shapes = {{"x", {v.n, v.c, v.h, v.w}}, {"weight", {v.o, v.c / v.groups, v.kh, v.kw}}};
  if (bias) p.shapes["bias"] = {v.o};
  p.scalars = {{"stride_h", v.stride_h}, {"stride_w", v.stride_w}, {"pad_h", v.pad_h},
               {"pad_w", v.pad_w},       {"dilation_h", v.dil_h},  {"dilation_w", v.dil_w},
               {"groups", v.groups}};
  return p;
}

std::vector<NnProblem> problems(bool bias) {
  const std::vector<Conv> cases = {
      // n  c   h   w   o  kh kw sh sw ph pw dh dw g
      {1, 3, 1, 1, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},      // 1x1 spatial, 1x1 filter
      {2, 7, 1, 1, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1},      // 1x1 spatial, 3x3 pad 1
      {1, 17, 9, 11, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // odd everything, 3x3 stride 1
      {2, 33, 13, 6, 7, 3, 3, 1, 1, 0, 0, 1, 1, 1},    // pad 0, batch 2
      {1, 5, 17, 23, 16, 3, 3, 1, 1, 2, 2, 1, 1, 1},   // pad 2
      {1, 3, 10, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1},     // stride 2
      {2, 6, 11, 12, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2},    // dilation 2, groups 2
      {1, 10, 8, 7, 15, 5, 3, 1, 2, 2, 1, 1, 3, 5},    // 5x3, groups 5, dilation 3 across
      {1, 16, 12, 12, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1},  // pointwise
      {1, 17, 15, 9, 17, 3, 3, 1, 1, 1, 1, 1, 1, 17},  // depthwise 3x3
      {2, 18, 9, 14, 18, 5, 5, 2, 2, 2, 2, 1, 1, 18},  // depthwise 5x5 stride 2
      {1, 7, 10, 10, 7, 3, 3, 1, 1, 1, 1, 2, 2, 7},    // depthwise dilation 2
      {1, 4, 1, 1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4},      // depthwise 1x1 spatial
      // Winograd (C >= 64, C x output pixels >= 131072): outputs off its 4x4 tiles in both
      // dims, pad 0 with batch 2, pad 2, and K = 2880 (its error at UNet depth).
      {1, 128, 33, 35, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // 33x35 output
      {2, 130, 31, 37, 7, 3, 3, 1, 1, 0, 0, 1, 1, 1},   // 29x35 output
      {1, 129, 29, 31, 16, 3, 3, 1, 1, 2, 2, 1, 1, 1},  // 31x33 output
      {1, 320, 21, 22, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // 21x22 output, K = 2880
      // direct_oc (groups 1): output channels off its 32/16 channel block, outputs off its 7x2
      // (AVX2 3x2) pixel block; direct_oc_unpadded (pad 0) where the tail blocks shift inwards.
      {1, 19, 17, 15, 37, 3, 3, 2, 2, 1, 1, 1, 1, 1},   // 3x3 stride 2 pad 1, odd everything
      {2, 13, 23, 21, 33, 1, 1, 2, 2, 0, 0, 1, 1, 1},   // 1x1 stride 2 pad 0 (downsample)
      {1, 9, 19, 29, 17, 3, 3, 3, 3, 0, 0, 1, 1, 1},    // 3x3 stride 3 pad 0
      {1, 21, 14, 31, 47, 1, 1, 3, 2, 1, 0, 1, 1, 1},   // 1x1 strides 3 x 2, pad 1 rows only
      {1, 11, 16, 47, 65, 3, 3, 2, 1, 1, 1, 1, 1, 1},   // wide rows: 2+ pixel blocks, o tail 1
      {1, 130, 14, 14, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // K = 1170, 7x7 output
      {1, 5, 13, 12, 18, 3, 3, 2, 2, 2, 2, 2, 2, 1},    // dilation 2, stride 2, groups 1
      {1, 24, 17, 30, 35, 1, 1, 2, 2, 0, 0, 1, 1, 1},   // unpadded: 9x15 output, both tails shift
      // direct_oc_blocked (C >= 64): C off its 8-channel blocks, 16x15 output.
      {1, 67, 31, 29, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1},
      // direct_oc_small (7x7 outputs, 14x14 with 3x3): channels off its 32-channel tasks.
      {2, 13, 13, 11, 45, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 1x1 stride 2: 7x6 output, batch 2
      {1, 9, 27, 25, 70, 3, 3, 2, 2, 1, 1, 1, 1, 1},   // 3x3 stride 2: 14x13 output, o tail 6
      // direct_oc_small_8 (3x3 or larger, outputs 7 or a multiple of 8 wide, <= 64 pixels; also
      // the 7x7 problems above): 8x8 with channels off the 32-channel tasks and the vectors;
      // stride 2 and batch 2; 4x16; pad 0; dilation 2.
      {1, 19, 8, 8, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {2, 67, 16, 15, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1},
      {1, 9, 4, 16, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 10, 10, 10, 9, 3, 3, 1, 1, 0, 0, 1, 1, 1},
      {1, 6, 12, 12, 40, 3, 3, 1, 1, 0, 0, 2, 2, 1},
      // direct_oc_small_8_16x16 (AVX-512; 3x3 or larger, outputs 7 or a multiple of 8 wide,
      // 65-256 pixels): 16x16 with O off the vectors and the 32-channel tasks;
      // stride 2 and batch 2 (16x16 from 31x32); 14x7 (7 wide).
      {1, 21, 16, 16, 45, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {2, 19, 31, 32, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1},
      {1, 9, 14, 7, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      // direct_oc_small_14x14 (AVX-512; C >= 64, 3x3, 65-196 pixels): C off the 8-channel
      // blocks, o off the 32-channel tasks; on AVX2 these run direct_oc_blocked.
      {1, 67, 27, 25, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // 14x13 output
      {2, 64, 20, 17, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // 10x9 output, batch 2
      // gemm_1x1 (1x1, stride 1, pad 0, two 256 x 256 tiles or more): tiles of whole rows
      // whose pixels are whole register blocks (W = 28: 8 rows on AVX-512) and a last tile
      // row off the image, two tile rows of output channels, K off the 16-lane vectors;
      // widths whose tiles start off the blocks (11 rows of 23, 1 row of 257: rounded out to
      // whole blocks); K over 2048 (the longer K chunk); fewer pixels than a vector, batch 3.
      {2, 70, 13, 28, 300, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {1, 600, 17, 23, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {1, 5, 3, 257, 9, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {2, 2100, 3, 5, 17, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {3, 8, 2, 3, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {1, 64, 14, 14, 300, 1, 1, 1, 1, 0, 0, 1, 1, 1},  // ResNet-like, 196 pixels
      {1, 90, 7, 7, 300, 1, 1, 1, 1, 0, 0, 1, 1, 1},    // gemm_1x1_small: 7x7
      {2, 70, 8, 8, 300, 1, 1, 1, 1, 0, 0, 1, 1, 1},    // gemm_1x1_small(_16): 8x8, batch 2
      {2, 33, 4, 8, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // 4x8: 32 pixels
      // Outputs of <= 64 pixels: tiles of nb whole images, nb the largest of 4, 3, 2 dividing N
      // with N x tile rows / 4 >= nb (else 1).
      {6, 33, 7, 7, 600, 1, 1, 1, 1, 0, 0, 1, 1, 1},   // nb 3 (3-4 tile rows)
      {2, 20, 5, 9, 1100, 1, 1, 1, 1, 0, 0, 1, 1, 1},  // 45 pixels, nb 2 (5-6 tile rows)
      {7, 33, 7, 7, 600, 1, 1, 1, 1, 0, 0, 1, 1, 1},   // nb 1
      // gemm_1x1_images (<= 64 pixels, N % 4 == 0): 4 images' pixels as one tile's columns,
      // 7x7 (a register block across two images), 5x9 with o off the tile rows, 8x8 (256
      // columns), 1x3 (the tile's 12 columns in one block), K off the vectors and K chunks.
      {8, 37, 7, 7, 300, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {4, 130, 5, 9, 530, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {4, 9, 8, 8, 70, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {12, 2100, 1, 3, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      // gemm_1x1_s2: the same tiles over the subsampled input (even and odd input widths);
      // gemm_1x1_s2_small the 7x7 output.
      {2, 70, 26, 56, 300, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 13x28 output
      {1, 600, 34, 45, 20, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 17x23 output
      {1, 5, 5, 513, 9, 1, 1, 2, 2, 0, 0, 1, 1, 1},     // 3x257 output
      {1, 64, 28, 27, 300, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 14x14 output
      {1, 90, 13, 14, 300, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 7x7 output
      // gemm_1x1_s2_images (<= 64 output pixels, N % 4 == 0): 7x7 from 13x14 and 14x14, 4x8
      // from 7x16 (o off the tile rows), 1x1 from 2x2.
      {8, 37, 13, 14, 300, 1, 1, 2, 2, 0, 0, 1, 1, 1},
      {4, 130, 14, 14, 70, 1, 1, 2, 2, 0, 0, 1, 1, 1},
      {4, 9, 7, 16, 530, 1, 1, 2, 2, 0, 0, 1, 1, 1},
      {8, 2100, 2, 2, 40, 1, 1, 2, 2, 0, 0, 1, 1, 1},
      // gemm_3x3 (3x3 stride 1, 65-256 output pixels, C >= 1536 or 197-256 pixels with C x
      // pixels >= 131072): 16x16 with K = 4680 (the longer K chunk), 15x15 at batch 2 with o
      // off the tile rows. (Not C >= 1536: at K = 14400 the direct algorithms, which every
      // problem here also runs, summed past their 1e-4 tolerance, 1.2-1.3x of it.)
      {1, 520, 16, 16, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {2, 600, 15, 15, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {6, 70, 13, 14, 520, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 7x7 output, nb 3 (AVX2: 2)
  };
  std::vector<NnProblem> out;
  for (const auto& c : cases) out.push_back(problem(c, bias));
  return out;
}

NnTensors reference(const NnShapes& s, const NnTensors& in, const NnScalars& sc, bool bias) {
  const auto& xs = s.at("x");
  const auto& ws = s.at("weight");
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t O = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  const auto i = [&](const char* n) { return static_cast<int64_t>(sc.at(n)); };
  const int64_t sh = i("stride_h"), sw = i("stride_w"), ph = i("pad_h"), pw = i("pad_w");
  const int64_t dh = i("dilation_h"), dw = i("dilation_w"), groups = i("groups");
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1;
  const int64_t OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  const auto& x = in.at("x");
  const auto& w = in.at("weight");
  std::vector<double> y(N * O * OH * OW);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / (O / groups);
      for (int64_t r = 0; r < OH; ++r) {
        for (int64_t q = 0; q < OW; ++q) {
          double acc = bias ? in.at("bias")[o] : 0.0;
          for (int64_t c = 0; c < CG; ++c) {
            for (int64_t a = 0; a < KH; ++a) {
              for (int64_t b = 0; b < KW; ++b) {
                const int64_t hy = r * sh + a * dh - ph, wx = q * sw + b * dw - pw;
                if (hy < 0 || hy >= H || wx < 0 || wx >= W) continue;
                acc += x[((n * C + g * CG + c) * H + hy) * W + wx] *
                       w[((o * CG + c) * KH + a) * KW + b];
              }
            }
          }
          y[((n * O + o) * OH + r) * OW + q] = bias ? std::max(acc, 0.0) : acc;
        }
      }
    }
  }
  return {{"y", y}};
}

}  // namespace

void add_conv2d(NnReferences& r) {
  r["conv2d"] =
      NnReference{problems(false), [](const NnShapes& s, const NnTensors& in, const NnScalars& sc,
                                      const NnAttrs&) { return reference(s, in, sc, false); }};
  r["conv2d_bias_relu"] =
      NnReference{problems(true), [](const NnShapes& s, const NnTensors& in, const NnScalars& sc,
                                     const NnAttrs&) { return reference(s, in, sc, true); }};
}

}  // namespace opforge::nn_golden
