/* A C program built against an installed opforge with pkg-config only: opens the registry
 * installed with the library (opforge_open(NULL)), runs one Adam step and checks it. */
#include <opforge/opforge.h>
#include <stdio.h>
#include <string.h>

#include "adam_reference.h"

static int fail(const char* what) {
  fprintf(stderr, "consumer_pkgconfig: %s: %s\n", what, opforge_last_error());
  return 1;
}

int main(void) {
  if (strcmp(opforge_version(), OPFORGE_VERSION_STRING) != 0) {
    fprintf(stderr, "consumer_pkgconfig: library %s, header %s\n", opforge_version(),
            OPFORGE_VERSION_STRING);
    return 1;
  }
  opforge_registry* reg = NULL;
  if (opforge_open(NULL, &reg)) return fail("opforge_open(NULL)");
  opforge_kernel* k = NULL;
  if (opforge_select(reg, "apply_adam", NULL, NULL, &k)) return fail("opforge_select");

  static float var[kAdamN], m[kAdamN], v[kAdamN], g[kAdamN];
  static double rvar[kAdamN], rm[kAdamN], rv[kAdamN], rg[kAdamN];
  adam_fill(var, m, v, g, kAdamN);
  for (int i = 0; i < kAdamN; ++i) rvar[i] = var[i], rm[i] = m[i], rv[i] = v[i], rg[i] = g[i];
  adam_reference(rvar, rm, rv, rg, kAdamN);

  const int64_t shape[1] = {kAdamN};
  const opforge_tensor t[4] = {{"var", var, OPFORGE_F32, 1, shape},
                               {"m", m, OPFORGE_F32, 1, shape},
                               {"v", v, OPFORGE_F32, 1, shape},
                               {"grad", g, OPFORGE_F32, 1, shape}};
  const opforge_scalar s[6] = {{"beta1_power", kBeta1Power},
                               {"beta2_power", kBeta2Power},
                               {"lr", kLr},
                               {"beta1", kBeta1},
                               {"beta2", kBeta2},
                               {"epsilon", kEpsilon}};
  if (opforge_call(k, t, 4, s, 6)) return fail("opforge_call");
  const float* got[3] = {var, m, v};
  const double* want[3] = {rvar, rm, rv};
  const char* names[3] = {"var", "m", "v"};
  for (int j = 0; j < 3; ++j) {
    int i = adam_mismatch(got[j], want[j], kAdamN);
    if (i >= 0) {
      fprintf(stderr, "consumer_pkgconfig: %s[%d] = %.9g, fp64 reference %.9g\n", names[j], i,
              got[j][i], want[j][i]);
      return 1;
    }
  }
  printf("consumer_pkgconfig: ok: %s (%s), N = %d, registry %s\n", opforge_kernel_variant(k),
         opforge_kernel_isa(k), kAdamN, opforge_default_registry());
  opforge_close(reg);
  return 0;
}
