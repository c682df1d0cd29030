// conv2d and conv2d_bias_relu: the declarations (shapes, checks, algorithms, cost). The
// builders live in nn_conv2d_direct.cpp, nn_conv2d_direct_oc.cpp, nn_conv2d_gemm.cpp,
// nn_conv2d_winograd.cpp, nn_conv2d_depthwise.cpp.
//
// Layout NCHW: torch's default, so a torch user's tensors pass through without a copy; oneDNN
// takes NCHW through format tags (and reorders internally). Halide sees x[N, C, H, W] as
// x(w, h, c, n): W innermost, the axis direct, depthwise and Winograd vectorize along (output
// pixels, or Winograd tiles along a row of tiles); direct_oc vectorizes along output channels
// (x broadcast) and transposes its register block into y.
#include "generators/nn_conv2d.h"

#include "generators/nn_matmul.h"
#include "generators/nn_ops.h"

namespace opforge::generators {

namespace {

using dsl::NnArgs;
using dsl::NnOpDecl;
using registry::DType;

const char* kOH = "(H + 2*pad_h - dilation_h*(KH - 1) - 1) / stride_h + 1";
const char* kOW = "(W + 2*pad_w - dilation_w*(KW - 1) - 1) / stride_w + 1";
// Output pixels per image, for the algorithms' conditions.
const std::string kPixels = "(" + std::string(kOH) + ") * (" + kOW + ")";

// gemm_1x1's shapes: 1x1, stride s, pad 0, and at least two of AVX-512's tiles of output
// channels x pixels (256 x 256: nn_conv2d_gemm.cpp).
std::string k1x1_gemm(int s) {
  const std::string t = std::to_string(kMatmulTileColumns), st = std::to_string(s);
  const std::string up = " + " + std::to_string(kMatmulTileColumns - 1) + ") / " + t;
  return "groups == 1 && KH == 1 && KW == 1 && stride_h == " + st + " && stride_w == " + st +
         " && pad_h == 0 && pad_w == 0 && (O" + up + " * ((" + kPixels + up + ") * N >= 2";
}

NnOpDecl declare(const std::string& name, bool bias_relu) {
  NnOpDecl d(name);
  d.input("x", {"N", "C", "H", "W"}, "Input, NCHW")
      .input("weight", {"O", "CG", "KH", "KW"},
             "Filters, OIHW with CG = C / groups input channels");
  if (bias_relu) d.input("bias", {"O"}, "Added per output channel before the ReLU");
  d.scalar("stride_h", "Vertical stride (>= 1)", DType::i32)
      .scalar("stride_w", "Horizontal stride (>= 1)", DType::i32)
      .scalar("pad_h", "Zero rows added above and below (>= 0)", DType::i32)
      .scalar("pad_w", "Zero columns added left and right (>= 0)", DType::i32)
      .scalar("dilation_h", "Vertical filter dilation (>= 1)", DType::i32)
      .scalar("dilation_w", "Horizontal filter dilation (>= 1)", DType::i32)
      .scalar("groups", "Channel groups (C and O divisible by it)", DType::i32)
      .output("y", {"N", "O", kOH, kOW}, bias_relu ? "max(conv + bias, 0), NCHW" : "Output, NCHW");
  d.check("stride_h >= 1 && stride_w >= 1", "stride_h and stride_w must be >= 1")
      .check("dilation_h >= 1 && dilation_w >= 1", "dilation_h and dilation_w must be >= 1")
      .check("pad_h >= 0 && pad_w >= 0", "pad_h and pad_w must be >= 0")
      .check("groups >= 1", "groups must be >= 1")
      .check("C % groups == 0", "x has C channels, not divisible by groups")
      .check("CG * groups == C",
             "weight's input channels CG times groups must equal x's channels C")
      .check("O % groups == 0", "weight's output channels O must be divisible by groups")
      .check(std::string(kOH) + " >= 1 && " + kOW + " >= 1",
             "the (dilated) filter is larger than the padded input: the output would be empty");

  // One builder per algorithm for both ops: the flag adds bias + ReLU to its output stage.
  auto with = [bias_relu](dsl::NnKernel (*build)(const conv::ConvInputs&)) {
    return
        [bias_relu, build](const NnArgs& a) { return build(conv::ConvInputs::from(a, bias_relu)); };
  };
  d.algorithm("direct", "", 0,
              "Any stride, padding, dilation, groups: 32 pixels x 8 channels register blocks",
              with(conv::build_direct))
      .algorithm("direct_oc", "groups == 1", 4,
                 "groups == 1, any stride, padding, dilation: 2 vectors of output channels x "
                 "7x2 pixels (AVX2 3x2) per register block (strides only space the broadcasts)",
                 with(conv::build_direct_oc))
      // 64 or more input channels: x through a channel-blocked copy (8 channels a cache line);
      // padding C to a multiple of 8 doubled the time of ResNet's 3-channel stem.
      .algorithm("direct_oc_blocked", "groups == 1 && C >= 64", 5,
                 "direct_oc reading x channel-blocked (8 input channels innermost): C >= 64",
                 with(conv::build_direct_oc_blocked))
      // Pad 0 and an output of at least one register block (7 x 2 pixels): x read in place.
      .algorithm("direct_oc_unpadded",
                 std::string("groups == 1 && pad_h == 0 && pad_w == 0 && ") + kOW + " >= 7 && " +
                     kOH + " >= 2",
                 6,
                 "direct_oc without the padded input copy (pad 0, output >= 7 x 2): 1x1 "
                 "stride-2 downsampling",
                 with(conv::build_direct_oc_unpadded))
      // Small outputs (7x7; 14x14 with a 3x3 filter): a task per 32 output channels over all
      // pixels, its weights packed per task and reused from L2 (direct_oc's row-pair tasks
      // re-stream a 128-channel group's weights from L3 for every pair of output rows).
      .algorithm("direct_oc_small",
                 "groups == 1 && (" + kPixels + " <= 64 || (KH * KW >= 9 && " + kPixels +
                     " <= 196 && C < 64))",
                 7,
                 "direct_oc with a task per 32 output channels over all pixels (small outputs: "
                 "7x7, or 14x14 with a 3x3 filter and C < 64); AVX2 block 1 vector x 7x2 pixels",
                 with(conv::build_direct_oc_small))
      // The same on 65-196 pixel outputs with 3x3 or larger filters and C >= 64, shipped for
      // AVX-512 only (op_table.cpp): there AVX2 runs direct_oc_blocked, whose 2 vectors x 3x2
      // block took 0.71-0.83x direct_oc_small's time (1 vector x 7x2) on four shapes (3x3
      // stride 2 -> 14x14, 14x13, 12x12, 10x10; C 128-512; 2 threads, quiet host, Xeon family 6
      // model 207, `opforge bench conv2d --isa avx2`), on AVX-512 0.98x-1.02x its time.
      .algorithm("direct_oc_small_14x14",
                 "groups == 1 && C >= 64 && KH * KW >= 9 && " + kPixels + " > 64 && " + kPixels +
                     " <= 196",
                 7,
                 "direct_oc_small on outputs of 65-196 pixels with a 3x3 or larger filter and "
                 "C >= 64 (AVX-512 only; AVX2 uses direct_oc_blocked there)",
                 with(conv::build_direct_oc_small))
      // At most 64 output pixels, 7 or a multiple of 8 wide, with a 3x3 or larger filter
      // (ResNet's 7x7, the UNet's 8x8): direct_oc_small with blocks of 8 pixels along a row
      // (nn_conv2d_direct_oc.cpp has the numbers). Above direct_oc_small's 7; the gemm
      // algorithms at 8 take 1x1 filters only.
      .algorithm("direct_oc_small_8",
                 "groups == 1 && KH * KW >= 9 && ((" + std::string(kOW) + ") == 7 || (" + kOW +
                     ") % 8 == 0) && " + kPixels + " <= 64",
                 8,
                 "direct_oc_small on outputs of at most 64 pixels, 7 or a multiple of 8 wide, "
                 "with a 3x3 or larger filter (ResNet's 7x7, the UNet's 8x8): 2 vectors x 8x1 "
                 "pixels (AVX2 4x1) per register block",
                 with(conv::build_direct_oc_small_8))
      // The same 8-pixel row blocks on 65-256 pixel outputs (the UNet's 16x16 level), shipped
      // for AVX-512 only (op_table.cpp), above gemm_3x3 and Winograd: tasks of 32 channels over
      // every pixel balance over the threads where direct_oc_blocked's 128-channel groups did
      // not (320 channels: 3 groups), and a 16-wide row is two whole blocks where its 7 x 2
      // blocks computed 21 columns. Time against the previous pick, AVX-512, 2 threads
      // (2026-12-06, AMD EPYC family 25 model 17; scripts/BENCHMARKS.md): 320@16 -> 320
      // (direct_oc_blocked) 0.61x, batch 2 0.78x, 128@16 0.82x, 320@32 -> 640 stride 2 0.76x;
      // 640@16 (gemm_3x3) 0.72x, 1280@16 0.78x, 1920@16 and 2560@16 -> 1280 0.85x / 0.90x,
      // batch 2 640@16 and 1280@16 0.97-0.98x. AVX2's 2 x 4x1 block took 1.32x
      // direct_oc_blocked's time at 320@16.
      .algorithm("direct_oc_small_8_16x16",
                 "groups == 1 && KH * KW >= 9 && ((" + std::string(kOW) + ") == 7 || (" + kOW +
                     ") % 8 == 0) && " + kPixels + " > 64 && " + kPixels + " <= 256",
                 12,
                 "direct_oc_small_8 on outputs of 65-256 pixels, 7 or a multiple of 8 wide, with "
                 "a 3x3 or larger filter (the UNet's 16x16; AVX-512 only)",
                 with(conv::build_direct_oc_small_8))
      // 1x1, stride 1, pad 0: a matrix product per image (weight . x[n] with the pixels
      // flattened), through matmul's packed GEMM (nn_conv2d_gemm.cpp). At least two of
      // AVX-512's tiles (256 channels x 256 pixels), or one thread idles: 1024 -> 256 at
      // 14x14 (one tile) took 1.10x direct_oc_unpadded's time. (A tile height that made more
      // tasks from O left Halide's bounds inference unable to bound the batch.) Measured
      // against the algorithms it replaces: scripts/BENCHMARKS.md, "1x1 convolutions as GEMMs".
      .algorithm("gemm_1x1", k1x1_gemm(1) + " && H * W > 64", 8,
                 "1x1, stride 1, pad 0, more than 64 pixels and at least two 256 x 256 tiles of "
                 "output channels x pixels: matmul's packed GEMM per image (weight [O, C] . x "
                 "[C, H*W]), tasks of whole output rows x output channels",
                 with(conv::build_gemm_1x1))
      // The same on outputs of 64 pixels or fewer (ResNet's 7x7), shipped for AVX-512 only
      // (op_table.cpp): there AVX2's direct_oc_small took 0.84-0.94x its time (2048 -> 512
      // and 512 -> 2048), AVX-512's 1.4-1.9x.
      .algorithm("gemm_1x1_small", k1x1_gemm(1) + " && H * W <= 64", 8,
                 "gemm_1x1 on outputs of 64 pixels or fewer (AVX-512 only; AVX2 uses "
                 "direct_oc_small there)",
                 with(conv::build_gemm_1x1))
      // The same on AVX2 (op_table.cpp) where the pixels fill whole 16-column register blocks
      // (16, 32, 48 or 64: the UNet's 8x8): against direct_oc_small 0.57-0.59x the time
      // (2560@8 -> 1280, batch 1 and 2; 2026-12-05, AMD EPYC family 26 model 2, 2 threads),
      // where at 7x7 (64 columns for 49) it ran 0.99-1.13x.
      .algorithm("gemm_1x1_small_16", k1x1_gemm(1) + " && H * W <= 64 && (H * W) % 16 == 0", 8,
                 "gemm_1x1_small on AVX2 where the output pixels fill whole 16-column register "
                 "blocks (16, 32, 48 or 64; AVX-512 runs gemm_1x1_small there)",
                 with(conv::build_gemm_1x1))
      // The same outputs at a batch divisible by 4: tiles of 4 images whose pixels run on as
      // the product's columns (196 columns at 7x7, not 4 x 64), nn_conv2d_gemm_images.cpp.
      .algorithm("gemm_1x1_images", k1x1_gemm(1) + " && H * W <= 64 && N % 4 == 0", 9,
                 "gemm_1x1 on outputs of 64 pixels or fewer at a batch divisible by 4: tiles "
                 "of 4 images with their pixels as consecutive columns (at 7x7, 196 columns "
                 "in 7 register blocks, AVX2 13, where 4 one-image tiles take 8, AVX2 16)",
                 with(conv::build_gemm_1x1_images))
      // Stride 2, more than 64 output pixels, both ISAs: against the previous picks
      // (direct_oc_unpadded; direct_oc_small at 7x7, which beats gemm_1x1_small at stride 1 on
      // AVX2) it took 0.59-1.09x their time on ResNet's five stride-2 1x1 shapes, above 1 only
      // on AVX2's 1024@14 -> 2048 in one of two runs (scripts/BENCHMARKS.md): that 7x7 output
      // is gemm_1x1_s2_small's now, below.
      .algorithm("gemm_1x1_s2", k1x1_gemm(2) + " && " + kPixels + " > 64", 8,
                 "gemm_1x1 at stride 2 (ResNet's downsampling shortcuts), more than 64 output "
                 "pixels: each K chunk's input rows subsampled into a dense slab before the B "
                 "pack",
                 with(conv::build_gemm_1x1_s2))
      // The same on outputs of 64 pixels or fewer (ResNet's 1024@14 -> 2048 and -> 512),
      // shipped for AVX-512 only (op_table.cpp), as gemm_1x1_small at stride 1: AVX2's
      // direct_oc_small took 0.81-0.85x its time at -> 2048 and 0.72-0.87x at -> 512, batch 1
      // and 2, AVX-512's 1.29-1.31x (2026-12-07, AMD EPYC family 26 model 2, 2 threads;
      // scripts/BENCHMARKS.md "AVX2, 7x7 outputs at stride 2").
      .algorithm("gemm_1x1_s2_small", k1x1_gemm(2) + " && " + kPixels + " <= 64", 8,
                 "gemm_1x1_s2 on outputs of 64 pixels or fewer, one image a tile (AVX-512 only; "
                 "AVX2 runs direct_oc_small there)",
                 with(conv::build_gemm_1x1_s2))
      // The same with 4 images a tile on outputs of <= 64 pixels (ResNet's 1024@14 -> 2048).
      .algorithm("gemm_1x1_s2_images", k1x1_gemm(2) + " && " + kPixels + " <= 64 && N % 4 == 0", 9,
                 "gemm_1x1_images at stride 2 (outputs of 64 pixels or fewer, a batch "
                 "divisible by 4): every other pixel of every other row copied into the "
                 "tile's slab",
                 with(conv::build_gemm_1x1_s2_images))
      // 3x3 stride 1 as a GEMM per image, K = 9 C (an im2col slab per K chunk,
      // nn_conv2d_gemm_images.cpp), on outputs of 65-256 pixels where the others break down:
      // 197-256 pixels where Winograd would apply (C x pixels >= 131072: the UNet's 16x16
      // level), and any of them with C >= 1536, where direct_oc's 128-channel weight groups
      // (over 7 MB) stream from memory for every row pair. Time against the previous pick
      // (2026-12-05, AMD EPYC family 26 model 2, 2 threads, AVX-512 / AVX2): 1280@16 -> 1280
      // (Winograd) 0.64 / 0.87, 2560@16 -> 1280 0.52 / 0.74, 640@16 -> 640 0.87 / 0.91, batch
      // 2 640@16 0.53 / 0.73; 2560@10 -> 1280 0.83 against direct_oc_small_14x14 (AVX-512) and
      // 0.20 against direct_oc_blocked (AVX2). Not below: 1280@14 (direct_oc_small_14x14 /
      // direct_oc_blocked 0.84 / 0.86x its time), 320@16 (direct_oc_blocked, 0.96-1.06x), 1280@8
      // (direct_oc_small_8, 0.67-0.70x); scripts/BENCHMARKS.md, "The UNet at batch 2". On
      // AVX-512, outputs 7 or a multiple of 8 wide run direct_oc_small_8_16x16 instead (above).
      .algorithm("gemm_3x3",
                 "groups == 1 && KH == 3 && KW == 3 && stride_h == 1 && stride_w == 1 && "
                 "dilation_h == 1 && dilation_w == 1 && " +
                     kPixels + " > 64 && " + kPixels + " <= 256 && (C >= 1536 || (" + kPixels +
                     " > 196 && C * " + kPixels + " >= 131072))",
                 11,
                 "3x3 stride 1 as matmul's packed GEMM per image (K = 9 C, an im2col slab per K "
                 "chunk) on outputs of 65-256 pixels with C >= 1536, or 197-256 pixels with C x "
                 "pixels >= 131072 (the UNet's 16x16 level)",
                 with(conv::build_gemm_3x3))
      // Winograd where its 36 transform-domain GEMMs (C x O x output pixels / 16 each) are
      // large enough to pay for the transforms: C >= 64, C x output pixels >= 131072 and more
      // than 256 output pixels (below, with large C: gemm_3x3 or the direct algorithms took
      // 0.29-0.74x its time, 2560@8 -> 1280 direct_oc_small_8 0.34-0.42x).
      // Below, the direct picks took 0.37-0.95x its time (ResNet-50's 128@28, 256@14 and
      // 512@7, the UNet's 1280@8); above, it took 0.26-0.99x theirs on the UNet's 320@64,
      // 640@32 and 1280@16, and 0.87-1.11x on ResNet-50's 64@56 and 256@28 (2026-12-05, AMD
      // EPYC family 26 model 2, 2 threads, both ISAs, two runs; scripts/BENCHMARKS.md,
      // "Winograd's shapes").
      .algorithm("winograd",
                 "KH == 3 && KW == 3 && stride_h == 1 && stride_w == 1 && dilation_h == 1 && "
                 "dilation_w == 1 && groups == 1 && C >= 64 && C * " +
                     kPixels + " >= 131072 && " + kPixels + " > 256",
                 10,
                 "Winograd F(4x4, 3x3): 4x fewer multiplies; 36 GEMMs over channels in the "
                 "transform domain (larger rounding error than direct); C >= 64, C x output "
                 "pixels >= 131072 and more than 256 output pixels (smaller shapes run direct "
                 "or gemm_3x3)",
                 with(conv::build_winograd))
      .algorithm("depthwise", "groups == C && CG == 1 && O == C", 20,
                 "One filter per channel (depthwise, multiplier 1): a stencil per plane",
                 with(conv::build_depthwise));

  d.estimate("N", 1).estimate("C", 320).estimate("O", 320).estimate("CG", 320);
  d.estimate("H", 64).estimate("W", 64).estimate("KH", 3).estimate("KW", 3);
  std::string out_elems = "N * O * (" + std::string(kOH) + ") * (" + kOW + ")";
  d.cost("2 * " + out_elems + " * CG * KH * KW",
         "4 * (N*C*H*W + O*CG*KH*KW + " + out_elems + (bias_relu ? " + O)" : ")"));
  // The Stable-Diffusion-UNet-like call of the goal (Winograd's shape).
  d.example(std::string("x=1,320,64,64 weight=320,320,3,3 ") + (bias_relu ? "bias=320 " : "") +
            "stride_h=1 stride_w=1 pad_h=1 pad_w=1 dilation_h=1 dilation_w=1 groups=1");
  d.summary(bias_relu ? "2-D convolution (NCHW) + bias + ReLU, fused"
                      : "2-D convolution (NCHW): stride, padding, dilation, groups");
  d.formula(bias_relu ? "y[n,o,i,j] = max(bias[o] + sum_{c<CG,kh,kw} x[n, g*CG + c, i*stride_h + "
                        "kh*dilation_h - pad_h, j*stride_w + kw*dilation_w - pad_w] * "
                        "weight[o,c,kh,kw], 0), g = o / (O/groups), x = 0 outside"
                      : "y[n,o,i,j] = sum_{c<CG,kh,kw} x[n, g*CG + c, i*stride_h + kh*dilation_h - "
                        "pad_h, j*stride_w + kw*dilation_w - pad_w] * weight[o,c,kh,kw], "
                        "g = o / (O/groups), x = 0 outside");
  d.reference(bias_relu ? "torch.relu(torch.nn.functional.conv2d(x, weight, bias, stride, "
                          "padding, dilation, groups))"
                        : "torch.nn.functional.conv2d(x, weight, None, stride, padding, "
                          "dilation, groups)");
  // Winograd F(4x4,3x3) is the loosest algorithm: its transforms scale values by up to 8
  // (A^T) and 1/24 (G), and measured errors on uniform(-1, 1) data were up to
  // 2.5e-5 * sqrt(CG*9) (1.9e-3 at C = 640); direct and depthwise stay near 3e-6 * sqrt(K).
  // The fp64-reference tolerance must hold for every algorithm the runtime may pick.
  // Each variant's descriptor carries its algorithm's tolerance. Winograd's (the op's) grows
  // with sqrt(K): 1.37e-3 measured at C = 320 (1.002x of a 1e-3 + 1e-3|ref| bound, on the
  // op's example call against torch's fp64 conv2d), 1.9e-3 at C = 640; atol 3e-3 holds to
  // C = 1280 on unit-scale data and still fails a dropped or misplaced term (~0.3). Direct and
  // depthwise sum the same products in fp32 as the reference does in fp64 (errors near
  // 3e-6 * sqrt(K) measured), so theirs is 30x tighter.
  d.tolerance(1e-3, 3e-3);
  d.algorithm_tolerance("direct", 1e-4, 1e-4)
      .algorithm_tolerance("direct_oc", 1e-4, 1e-4)
      .algorithm_tolerance("direct_oc_unpadded", 1e-4, 1e-4)
      .algorithm_tolerance("direct_oc_small", 1e-4, 1e-4)
      .algorithm_tolerance("direct_oc_small_8", 1e-4, 1e-4)
      .algorithm_tolerance("direct_oc_small_8_16x16", 1e-4, 1e-4)
      .algorithm_tolerance("direct_oc_small_14x14", 1e-4, 1e-4)
      .algorithm_tolerance("direct_oc_blocked", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_1x1", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_1x1_small", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_1x1_small_16", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_1x1_images", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_1x1_s2_images", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_3x3", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_1x1_s2", 1e-4, 1e-4)
      .algorithm_tolerance("gemm_1x1_s2_small", 1e-4, 1e-4)
      .algorithm_tolerance("depthwise", 1e-4, 1e-4);
  return d;
}

}  // namespace

const dsl::NnOpDecl& conv2d() {
  static const NnOpDecl d = declare("conv2d", false);
  return d;
}

const dsl::NnOpDecl& conv2d_bias_relu() {
  static const NnOpDecl d = declare("conv2d_bias_relu", true);
  return d;
}

}  // namespace opforge::generators
