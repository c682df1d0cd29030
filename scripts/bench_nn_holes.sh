#!/usr/bin/env bash
# The NN problems of issue 18's performance goals, one after the other on both ISAs (the bf16
# rows again on the avx512_bf16 tier where the CPU has it): the memory-bound ops (fp32 and
# bf16 activations) against the same-traffic copy and oneDNN, matmul, strided convolution
# (ResNet-50 v1.5 shapes) and attention against oneDNN. Each line
# is one `opforge bench` (same-run, interleaved medians); the CPU model and ISA head the output.
# AVX2 rows limit oneDNN to AVX2 (ONEDNN_MAX_CPU_ISA), so both sides run the same ISA.
# Usage: scripts/bench_nn_holes.sh [BUILD_DIR]   (run on an otherwise idle machine)
set -euo pipefail
build=${1:-"$(dirname "$0")/../build"}
B="$build/registry/cli/opforge"
export OPFORGE_REGISTRY=${OPFORGE_REGISTRY:-$build/oplib}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)  $(nproc) CPUs"
show() { grep -E "opforge|oneDNN|bandwidth|%" || true; }
memory_bound=(layer_norm rms_norm softmax gelu group_norm silu add_layer_norm)
for isa in avx512 avx2 avx512_bf16; do
  if [[ $isa == avx512 ]] && ! grep -qw avx512f /proc/cpuinfo; then continue; fi
  if [[ $isa == avx512_bf16 ]] && ! grep -qw avx512_bf16 /proc/cpuinfo; then continue; fi
  env=()
  [[ $isa == avx2 ]] && env=(ONEDNN_MAX_CPU_ISA=AVX2)
  bench() { echo "### ISA $isa: $*"; env "${env[@]}" "$B" bench "$@" --isa "$isa" 2>&1 | show; }
  if [[ $isa == avx512_bf16 ]]; then  # the tier holds the bf16 activation variants only
    for op in "${memory_bound[@]}"; do bench "$op" --attr dtype=bfloat16; done
    continue
  fi
  for op in "${memory_bound[@]}"; do
    bench "$op"
    bench "$op" --attr dtype=bfloat16
  done
  bench matmul --shape a=1024,1024 --shape b=1024,1024 --reps 10
  bench matmul --shape a=8,512,512 --shape b=8,512,512 --reps 10
  bench matmul --attr transpose_b=true --shape a=128,4096 --shape b=4096,4096 --reps 10
  for s in "256 56 256 3 1" "128 56 128 3 1" "256 28 256 3 1" "512 14 512 3 1" \
           "256 56 512 1 0" "512 28 1024 1 0" "1024 14 2048 1 0"; do
    read -r c hw o k pad <<<"$s"
    bench conv2d --shape "x=1,$c,$hw,$hw" --shape "weight=$o,$c,$k,$k" --scalar stride_h=2 \
      --scalar stride_w=2 --scalar pad_h="$pad" --scalar pad_w="$pad" --scalar dilation_h=1 \
      --scalar dilation_w=1 --scalar groups=1 --reps 10
  done
  for causal in false true; do
    bench scaled_dot_product_attention --attr causal=$causal --shape q=1,16,2048,64 \
      --shape k=1,16,2048,64 --shape v=1,16,2048,64 --reps 5
  done
  for l in 1 16; do  # decode-shaped: a few queries against a long cache
    bench scaled_dot_product_attention --shape q=1,16,$l,64 --shape k=1,16,2048,64 \
      --shape v=1,16,2048,64 --reps 20
  done
done
