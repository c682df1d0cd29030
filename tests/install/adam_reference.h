/* One TF ApplyAdam step in fp64, written from TensorFlow's formula (training_ops.cc):
 *   lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
 *   m += (g - m) * (1 - beta1);  v += (g^2 - v) * (1 - beta2)
 *   var -= lr_t * m / (sqrt(v) + epsilon)
 * and the deterministic inputs both consumers use. C, so both consumers share it. */
#ifndef OPFORGE_TESTS_INSTALL_ADAM_REFERENCE_H
#define OPFORGE_TESTS_INSTALL_ADAM_REFERENCE_H

#include <math.h>
#include <stdint.h>

enum { kAdamN = 1001 }; /* odd: exercises the vector tail */
static const double kBeta1 = 0.9, kBeta2 = 0.999, kLr = 0.01, kEpsilon = 1e-8;
static const double kBeta1Power = 0.9 * 0.9 * 0.9, kBeta2Power = 0.999 * 0.999 * 0.999;
/* fp32 kernel against fp64: a few fp32 roundings of each term. */
static const double kRtol = 1e-5, kAtol = 1e-7;

static inline float adam_input(uint32_t* state) {
  *state = *state * 1664525u + 1013904223u; /* LCG: the same values in C and C++ */
  return (float)((*state >> 8) * (1.0 / 16777216.0)) - 0.5f;
}

static inline void adam_fill(float* var, float* m, float* v, float* g, int n) {
  uint32_t s = 12345u;
  for (int i = 0; i < n; ++i) {
    var[i] = adam_input(&s);
    m[i] = 0.1f * adam_input(&s);
    v[i] = 0.01f * (adam_input(&s) + 0.5f);
    g[i] = adam_input(&s);
  }
}

/* The reference step on fp64 copies of the fp32 inputs. */
static inline void adam_reference(double* var, double* m, double* v, const double* g, int n) {
  const double lr_t = kLr * sqrt(1 - kBeta2Power) / (1 - kBeta1Power);
  for (int i = 0; i < n; ++i) {
    m[i] += (g[i] - m[i]) * (1 - kBeta1);
    v[i] += (g[i] * g[i] - v[i]) * (1 - kBeta2);
    var[i] -= lr_t * m[i] / (sqrt(v[i]) + kEpsilon);
  }
}

/* Index of the first element outside rtol/atol, or -1. */
static inline int adam_mismatch(const float* got, const double* want, int n) {
  for (int i = 0; i < n; ++i) {
    if (!(fabs(got[i] - want[i]) <= kAtol + kRtol * fabs(want[i]))) return i;
  }
  return -1;
}

#endif
