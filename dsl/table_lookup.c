/* x86 instructions Halide 14 does not emit, as functions its kernels call: table lookups as
 * permutes and the 16 x 16 transpose for dsl/table_lookup.h, prefetcht0 for dsl/output_prefetch.h's
 * input prefetches, and AVX-512's reciprocal estimate for dsl/math.cpp (at the end). Halide 14 emits no variable permute on x86 and compiles a
 * lookup into a small table as a gather (16 scalar loads per AVX-512 vector). Compiled to LLVM
 * bitcode once per ISA (dsl/CMakeLists.txt) and linked into the kernels that call these functions:
 * Halide calls NAMExL for an L-lane vector call of NAME when the module defines it (NAME itself for
 * scalars and tails), and LLVM inlines them.
 *
 * The table comes as arguments, one value per entry: the kernels pass constants, which LLVM
 * folds into one constant vector loaded once outside the loop, so a lookup is one vpermps /
 * vpermd (8 entries) or vpermi2ps / vpermi2d (32 entries, AVX-512). Every form reads the
 * index's low 3 or 5 bits only, as the permutes do, so callers need not mask it.
 *
 * GCC vector types, so that the functions take and return LLVM's <L x float> / <L x i32>;
 * hidden, so that no kernel exports them. */
#include <stdint.h>

typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
/* always_inline: no call (and no symbol to resolve: Halide's JIT found none for the scalar
 * forms, which LLVM otherwise kept as calls) is left in a kernel. */
#define HIDDEN __attribute__((visibility("hidden"), always_inline))

#define ARGS8(T) T t0, T t1, T t2, T t3, T t4, T t5, T t6, T t7
#define LANE0_8 t0[0], t1[0], t2[0], t3[0], t4[0], t5[0], t6[0], t7[0]

HIDDEN float opforge_lut8f(int32_t i, ARGS8(float)) {
  const float t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
  return t[i & 7];
}

HIDDEN int32_t opforge_lut8i(int32_t i, ARGS8(int32_t)) {
  const int32_t t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
  return t[i & 7];
}

HIDDEN f32x8 opforge_lut8fx8(i32x8 i, ARGS8(f32x8)) {
  const f32x8 t = {LANE0_8};
  return __builtin_ia32_permvarsf256(t, i);
}

HIDDEN i32x8 opforge_lut8ix8(i32x8 i, ARGS8(i32x8)) {
  const i32x8 t = {LANE0_8};
  return __builtin_ia32_permvarsi256(t, i);
}

/* A prefetch into every cache level (prefetcht0), which Halide's prefetch intrinsic is not
 * (prefetchnta). */
HIDDEN int32_t opforge_prefetch_t0(const char* base, int64_t byte_offset) {
  __builtin_prefetch(base + byte_offset, 0, 3);
  return 0;
}

#ifdef __AVX512F__
typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));

#define ARGS32(T)                                                                                \
  T t0, T t1, T t2, T t3, T t4, T t5, T t6, T t7, T t8, T t9, T t10, T t11, T t12, T t13, T t14, \
      T t15, T t16, T t17, T t18, T t19, T t20, T t21, T t22, T t23, T t24, T t25, T t26, T t27, \
      T t28, T t29, T t30, T t31
/* Lane 0 of the 32 vector arguments: the two halves of a vpermi2 table. */
#define LANE0_LO16                                                                              \
  t0[0], t1[0], t2[0], t3[0], t4[0], t5[0], t6[0], t7[0], t8[0], t9[0], t10[0], t11[0], t12[0], \
      t13[0], t14[0], t15[0]
#define LANE0_HI16                                                                                \
  t16[0], t17[0], t18[0], t19[0], t20[0], t21[0], t22[0], t23[0], t24[0], t25[0], t26[0], t27[0], \
      t28[0], t29[0], t30[0], t31[0]

HIDDEN f32x16 opforge_lut8fx16(i32x16 i, ARGS8(f32x16)) {
  const f32x16 t = {LANE0_8, LANE0_8}; /* twice: index bit 3 is not read either */
  return __builtin_ia32_permvarsf512(t, i);
}

HIDDEN i32x16 opforge_lut8ix16(i32x16 i, ARGS8(i32x16)) {
  const i32x16 t = {LANE0_8, LANE0_8};
  return __builtin_ia32_permvarsi512(t, i);
}

HIDDEN float opforge_lut32f(int32_t i, ARGS32(float)) {
  const float t[32] = {t0,  t1,  t2,  t3,  t4,  t5,  t6,  t7,  t8,  t9,  t10,
                       t11, t12, t13, t14, t15, t16, t17, t18, t19, t20, t21,
                       t22, t23, t24, t25, t26, t27, t28, t29, t30, t31};
  return t[i & 31];
}

HIDDEN int32_t opforge_lut32i(int32_t i, ARGS32(int32_t)) {
  const int32_t t[32] = {t0,  t1,  t2,  t3,  t4,  t5,  t6,  t7,  t8,  t9,  t10,
                         t11, t12, t13, t14, t15, t16, t17, t18, t19, t20, t21,
                         t22, t23, t24, t25, t26, t27, t28, t29, t30, t31};
  return t[i & 31];
}

HIDDEN f32x16 opforge_lut32fx16(i32x16 i, ARGS32(f32x16)) {
  const f32x16 lo = {LANE0_LO16}, hi = {LANE0_HI16};
  return __builtin_ia32_vpermi2varps512(lo, i, hi);
}

HIDDEN i32x16 opforge_lut32ix16(i32x16 i, ARGS32(i32x16)) {
  const i32x16 lo = {LANE0_LO16}, hi = {LANE0_HI16};
  return __builtin_ia32_vpermi2vard512(lo, i, hi);
}

/* Row j of the transpose of a 16 x 16 block given as its 16 rows t0 .. t15: lane l is t_l[j]
 * (dsl/table_lookup.h, transposed_lane). `self` is that element as the caller computed it, which
 * the scalar form returns (a lane on its own cannot see the other rows); the 16-lane form ignores
 * it, so the caller's loads for it are dead (wider vectors are split into 16-lane calls, one per
 * block). Called 16 times on the same rows with j = 0 .. 15 in one block, as the unrolled loop
 * does, the inlined networks share every shuffle: 64 for the 256 elements (four stages of unpacks
 * and 128-bit lane shuffles). */
#define ARGS16(T)                                                                                \
  T t0, T t1, T t2, T t3, T t4, T t5, T t6, T t7, T t8, T t9, T t10, T t11, T t12, T t13, T t14, \
      T t15

HIDDEN float opforge_tr16f(int32_t j, float self, ARGS16(float)) {
  (void)j;
  return self;
}

/* Narrower vectors see only part of each row: Halide would pad them to the 16-lane form, whose
 * lanes past theirs are undefined, so they have forms of their own that return self. */
typedef float f32x2 __attribute__((vector_size(8)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef int32_t i32x2 __attribute__((vector_size(8)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
#define TR16_SELF(L)                                                           \
  HIDDEN f32x##L opforge_tr16fx##L(i32x##L j, f32x##L self, ARGS16(f32x##L)) { \
    (void)j;                                                                   \
    return self;                                                               \
  }
TR16_SELF(2)
TR16_SELF(4)
TR16_SELF(8)

/* Within each 128-bit lane L (floats 4L .. 4L+3 of a, 16 + 4L .. of b), from offset o: the
 * 32-bit interleave (unpck{l,h}ps: o = 0, 2) and the 64-bit one (unpck{l,h}pd: o = 0, 2). */
#define I32(L, o) 4 * (L) + (o), 16 + 4 * (L) + (o), 4 * (L) + (o) + 1, 17 + 4 * (L) + (o)
#define I64(L, o) 4 * (L) + (o), 4 * (L) + (o) + 1, 16 + 4 * (L) + (o), 17 + 4 * (L) + (o)
#define UNPACK_32(a, b, o) __builtin_shufflevector(a, b, I32(0, o), I32(1, o), I32(2, o), I32(3, o))
#define UNPACK_64(a, b, o) __builtin_shufflevector(a, b, I64(0, o), I64(1, o), I64(2, o), I64(3, o))
/* Four 128-bit lanes of the pair (vshuff32x4): lanes 0-3 are a's, 4-7 b's. */
#define Q(l) 4 * (l), 4 * (l) + 1, 4 * (l) + 2, 4 * (l) + 3
#define LANES(a, b, l0, l1, l2, l3) __builtin_shufflevector(a, b, Q(l0), Q(l1), Q(l2), Q(l3))

HIDDEN f32x16 opforge_tr16fx16(i32x16 j, f32x16 self, ARGS16(f32x16)) {
  (void)self;
  const f32x16 r[16] = {t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14, t15};
  /* u[g][c], 128-bit lane L: rows 4g .. 4g+3 of column 4L + c. */
  f32x16 u[4][4];
  for (int g = 0; g < 4; ++g) {
    const f32x16 a0 = UNPACK_32(r[4 * g], r[4 * g + 1], 0),
                 a1 = UNPACK_32(r[4 * g], r[4 * g + 1], 2);
    const f32x16 a2 = UNPACK_32(r[4 * g + 2], r[4 * g + 3], 0),
                 a3 = UNPACK_32(r[4 * g + 2], r[4 * g + 3], 2);
    u[g][0] = UNPACK_64(a0, a2, 0);
    u[g][1] = UNPACK_64(a0, a2, 2);
    u[g][2] = UNPACK_64(a1, a3, 0);
    u[g][3] = UNPACK_64(a1, a3, 2);
  }
  /* Column 4L + c: lane L of u[0][c], u[1][c], u[2][c], u[3][c]. */
  f32x16 out[16];
  for (int c = 0; c < 4; ++c) {
    const f32x16 x = LANES(u[0][c], u[1][c], 0, 1, 4, 5), y = LANES(u[0][c], u[1][c], 2, 3, 6, 7);
    const f32x16 z = LANES(u[2][c], u[3][c], 0, 1, 4, 5), w = LANES(u[2][c], u[3][c], 2, 3, 6, 7);
    out[c] = LANES(x, z, 0, 2, 4, 6);
    out[4 + c] = LANES(x, z, 1, 3, 5, 7);
    out[8 + c] = LANES(y, w, 0, 2, 4, 6);
    out[12 + c] = LANES(y, w, 1, 3, 5, 7);
  }
  return out[j[0] & 15];
}
#endif

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#include <immintrin.h>

typedef float f32x4 __attribute__((vector_size(16)));

/* 1/x as dsl/math.cpp's estimate on AVX-512 (skylake level): vrcp14ps (relative error below
 * 2^-14) and one Newton step, r0 (2 - x r0); where that step gives NaN (x zero, denormal,
 * infinite or NaN, found by vfpclassps) the estimate itself, which is exact there. Halide's
 * fast_inverse is two 8-lane vrcpps with an extract and an insert, and dsl/math.cpp's bits test
 * three instructions more. The scalar form is lane 0 of the 4-lane one, so tails round alike. */
#define RCP_EXACT 0xBF /* vfpclassps: QNaN, +0, -0, +inf, -inf, denormal, SNaN */

HIDDEN f32x16 opforge_rcp14x16(f32x16 x) {
  const __m512 v = (__m512)x, r0 = _mm512_rcp14_ps(v);
  const __m512 r1 = _mm512_mul_ps(r0, _mm512_fnmadd_ps(v, r0, _mm512_set1_ps(2.0f)));
  return (f32x16)_mm512_mask_mov_ps(r1, _mm512_fpclass_ps_mask(v, RCP_EXACT), r0);
}

HIDDEN f32x8 opforge_rcp14x8(f32x8 x) {
  const __m256 v = (__m256)x, r0 = _mm256_rcp14_ps(v);
  const __m256 r1 = _mm256_mul_ps(r0, _mm256_fnmadd_ps(v, r0, _mm256_set1_ps(2.0f)));
  return (f32x8)_mm256_mask_mov_ps(r1, _mm256_fpclass_ps_mask(v, RCP_EXACT), r0);
}

HIDDEN f32x4 opforge_rcp14x4(f32x4 x) {
  const __m128 v = (__m128)x, r0 = _mm_rcp14_ps(v);
  const __m128 r1 = _mm_mul_ps(r0, _mm_fnmadd_ps(v, r0, _mm_set1_ps(2.0f)));
  return (f32x4)_mm_mask_mov_ps(r1, _mm_fpclass_ps_mask(v, RCP_EXACT), r0);
}

HIDDEN float opforge_rcp14(float x) {
  return opforge_rcp14x4((f32x4){x, x, x, x})[0];
}
#endif
