/* opforge runtime: plain C ABI.
 *
 * Opens a registry written by `opforge build`, picks a kernel variant for the running CPU,
 * checks the caller's tensors against the variant's descriptor and calls the kernel.
 * Needs no libHalide: kernels are shared objects that share one Halide runtime library
 * from the registry (one thread pool per process).
 *
 * Every function that can fail returns 0 on success and non-zero on failure; the message
 * is then available from opforge_last_error() (per thread, valid until the next call).
 */
#ifndef OPFORGE_OPFORGE_H
#define OPFORGE_OPFORGE_H

#include <stddef.h>
#include <stdint.h>

#include "opforge/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct opforge_registry opforge_registry;
typedef struct opforge_kernel opforge_kernel;

enum opforge_dtype {
  OPFORGE_F16 = 0,
  OPFORGE_BF16 = 1,
  OPFORGE_F32 = 2,
  OPFORGE_F64 = 3,
  OPFORGE_I32 = 4,
  OPFORGE_I64 = 5,
  OPFORGE_BOOL = 6,   /* one byte per element: 0 false, else true */
  OPFORGE_U8 = 7,     /* one byte per element, unsigned: codes of 8-bit optimizer states */
  OPFORGE_F8E4M3 = 8, /* one byte per element: OCP FP8 E4M3 bits (FP8 gradients) */
  OPFORGE_F8E5M2 = 9  /* one byte per element: OCP FP8 E5M2 bits */
};

/* A tensor argument, named as in the op's descriptor. The data must be C-contiguous.
 * In-place ops update state tensors where they lie. */
typedef struct opforge_tensor {
  const char* name;
  void* data;
  int dtype; /* enum opforge_dtype */
  int rank;
  const int64_t* shape;
} opforge_tensor;

/* A run-time scalar (hyperparameter), converted to the descriptor's dtype. */
typedef struct opforge_scalar {
  const char* name;
  double value;
} opforge_scalar;

const char* opforge_last_error(void);

/* The library's version, "MAJOR.MINOR.PATCH": compare with OPFORGE_VERSION_STRING to detect a
 * header/library mismatch. */
const char* opforge_version(void);

/* The registry opforge_open(NULL, ...) opens: $OPFORGE_REGISTRY if set, else the op library
 * installed with this library (or, in a build tree, that build's). Valid until the next call
 * on this thread. */
const char* opforge_default_registry(void);

/* The user registry (rule ops built on the fly: `opforge build --user`, Python's opforge.rule)
 * that registries read beside themselves: $OPFORGE_USER_REGISTRY, else
 * <compile cache dir>/user-registry; "" when none can be determined. Valid until the next call
 * on this thread. */
const char* opforge_default_user_registry(void);

/* The opforge command (the builder) that belongs with this library: the build tree's beside a
 * build-tree library, else <prefix>/bin/opforge of the install; "" when that file is missing.
 * Valid until the next call on this thread. */
const char* opforge_cli_path(void);

/* dir: a registry directory; NULL means $OPFORGE_REGISTRY or the build's default. The default
 * user registry is read beside it: an op the registry lacks is looked up there. */
int opforge_open(const char* dir, opforge_registry** out);
/* As opforge_open, with the user registry named: NULL for the default, "" for none. */
int opforge_open_with_user(const char* dir, const char* user_dir, opforge_registry** out);
void opforge_close(opforge_registry* reg);

/* The directory the registry was opened from (owned by the registry). */
const char* opforge_registry_dir(const opforge_registry* reg);
/* The user registry it reads beside itself, "" for none (owned by the registry). */
const char* opforge_registry_user_dir(const opforge_registry* reg);
/* The registry's i-th op name, sorted and unique, the user registry's included, as of the
 * last opforge_registry_refresh_ops (or the open) (owned by the registry), NULL past the
 * last. */
const char* opforge_registry_op(const opforge_registry* reg, size_t i);
/* Re-reads the op list (an op built meanwhile into the user registry); invalidates the names
 * opforge_registry_op returned. */
int opforge_registry_refresh_ops(opforge_registry* reg);
/* Every variant of `op` as a JSON array of descriptors (registry/SCHEMA.md), fp32 storage
 * first, into *json (valid until the next call on this thread). Fails for an unknown op (the
 * message suggests a near name). */
int opforge_op_variants_json(opforge_registry* reg, const char* op, const char** json);

/* attrs: "name=value,name=value" (NULL or "" for defaults). isa: "avx512", "avx2", ... or
 * NULL to pick the best the CPU supports ($OPFORGE_ISA overrides). The kernel is owned by
 * the registry and stays valid until opforge_close. */
int opforge_select(opforge_registry* reg, const char* op, const char* attrs, const char* isa,
                   opforge_kernel** out);
/* NN ops: the variant whose algorithm applies to these tensors and scalars (the descriptor's
 * algorithm.applies_when; outputs may be left out), highest algorithm priority first, then the
 * best ISA. attrs may hold algorithm=NAME to force one; a forced one that does not apply fails
 * with the condition and the values it read. Other ops: as opforge_select. */
int opforge_select_for(opforge_registry* reg, const char* op, const char* attrs, const char* isa,
                       const opforge_tensor* tensors, size_t n_tensors,
                       const opforge_scalar* scalars, size_t n_scalars, opforge_kernel** out);
/* NN ops: the shape of output `index` (descriptor order) for these inputs and scalars, into
 * shape[0..*rank); fails when the shapes break the op's rules or the rank exceeds max_rank.
 * NN outputs are fresh buffers passed to opforge_call as tensors named like the outputs. */
int opforge_output_shape(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                         const opforge_scalar* scalars, size_t n_scalars, size_t index,
                         int64_t* shape, int max_rank, int* rank);

/* NN ops: the value of a shape expression (registry/SCHEMA.md: dims, int scalars, int/bool
 * attrs; e.g. the descriptor's cost.flops) for this call, into *value; fails when the
 * shapes break the op's rules, the text is malformed or it reads a name the call lacks. */
int opforge_shape_value(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                        const opforge_scalar* scalars, size_t n_scalars, const char* expr,
                        int64_t* value);

/* The variant id and ISA the selection resolved to (owned by the kernel). */
const char* opforge_kernel_variant(const opforge_kernel* k);
const char* opforge_kernel_isa(const opforge_kernel* k);

/* The selected variant's descriptor as JSON (registry/SCHEMA.md) into *json (valid until the
 * next call on this thread). */
int opforge_kernel_descriptor_json(const opforge_kernel* k, const char** json);

/* Validates the arguments against the descriptor and calls the kernel. One kernel call takes
 * at most the descriptor's shape.max_elements elements per tensor (2^30 as built); a
 * splittable op (opforge_kernel_splittable) with more is updated in consecutive slices of at
 * most that many, any other op fails. */
int opforge_call(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                 const opforge_scalar* scalars, size_t n_scalars);

/* 1 when every output element depends only on the same element of the inputs (no
 * whole-tensor reduction such as LAMB's norms, not a sparse op): the op may run on slices. */
int opforge_kernel_splittable(const opforge_kernel* k);

/* opforge_call as consecutive kernel calls over slices of at most chunk_elements elements of
 * the flattened tensors (pointers offset per slice, scalars identical), validated once on the
 * whole tensors. The bytes of one opforge_call per slice, and of one whole call except in the
 * last bits for kernels whose vector tails round differently (runtime/README.md, Large tensors
 * and chunked calls). Fails for an op that is not splittable or chunk_elements < 1. */
int opforge_call_chunked(opforge_kernel* k, const opforge_tensor* tensors, size_t n_tensors,
                         const opforge_scalar* scalars, size_t n_scalars, int64_t chunk_elements);

/* Multi-tensor apply. A model layout places a model's tensors back to back in flat buffers:
 * tensor i occupies elements [offsets[i], offsets[i] + elements[i]) of every flat buffer, each
 * offset a multiple of the alignment, and every flat buffer holds total_elements elements (the
 * tensors and the padding between them). */
typedef struct opforge_model_layout opforge_model_layout;

/* One tensor of a model: a unique name and its shape (rank 0: one element). */
typedef struct opforge_tensor_shape {
  const char* name;
  int rank;
  const int64_t* shape;
} opforge_tensor_shape;

/* alignment: in elements, a power of two up to 2^20; 0 means the default, 32 (128 B of fp32,
 * 64 B of bf16/f16). Fails for a bad alignment, an empty or duplicate name or a negative
 * dimension. Free the layout with opforge_model_layout_free. */
int opforge_model_layout_create(const opforge_tensor_shape* tensors, size_t n_tensors,
                                int64_t alignment, opforge_model_layout** out);
/* A built-in model (opforge_model_preset_name lists them), e.g. "transformer-small". */
int opforge_model_layout_preset(const char* name, int64_t alignment, opforge_model_layout** out);
void opforge_model_layout_free(opforge_model_layout* layout);
/* The i-th preset's name, NULL past the last one. */
const char* opforge_model_preset_name(size_t i);

size_t opforge_model_layout_tensors(const opforge_model_layout* layout);
/* The length of every flat buffer (tensors and padding). */
int64_t opforge_model_layout_total_elements(const opforge_model_layout* layout);
/* n_tensors + 1 entries: offsets[i] is where tensor i starts, offsets[n_tensors] the total.
 * The int64 offsets table kernels take; owned by the layout. */
const int64_t* opforge_model_layout_offsets(const opforge_model_layout* layout);
/* n_tensors entries: the elements of each tensor (without padding); owned by the layout. */
const int64_t* opforge_model_layout_elements(const opforge_model_layout* layout);
/* Tensor i's name (owned by the layout), NULL out of range. */
const char* opforge_model_layout_name(const opforge_model_layout* layout, size_t i);

/* Updates the whole model in ONE kernel call over the flat buffers (one per tensor argument of
 * the op, each of total_elements elements). Elementwise splittable ops only: fails for LAMB and
 * LARS (per-tensor norms) and sparse ops, and for a flat buffer of another length, before
 * anything runs. Padding goes through the update too (keep it finite, zeros best); every real
 * element gets the bits one opforge_call per tensor would give. 8-bit-state variants (q8s...)
 * need a layout whose alignment is a multiple of their block (256), and absmax buffers of
 * total_elements / 256. */
int opforge_call_model(opforge_kernel* k, const opforge_model_layout* layout,
                       const opforge_tensor* flat, size_t n_flat, const opforge_scalar* scalars,
                       size_t n_scalars);

/* OCP FP8 bits for FP8-gradient variants (e4m3g, e5m2g), for callers whose arrays have no FP8
 * dtype (NumPy, torch 1.13); dtype is OPFORGE_F8E4M3 or OPFORGE_F8E5M2.
 * encode: bits[i] = the FP8 value nearest x[i] * scale (the product rounded to fp32 first),
 * ties to even; finite values beyond the largest finite FP8 value saturate to it, +-inf becomes
 * E5M2's infinity or E4M3's NaN, NaN stays NaN; scale > 0 and finite. Pass the kernel
 * grad_scale_inv = 1 / scale. decode: x[i] = the exact value of bits[i]. */
int opforge_fp8_encode(const float* x, size_t n, float scale, int dtype, uint8_t* bits);
int opforge_fp8_decode(const uint8_t* bits, size_t n, int dtype, float* x);

/* Threads a kernel's parallel loop runs on (0: the default: the calling thread's OpenMP team
 * size, OMP_NUM_THREADS or omp_set_num_threads; Halide's own pool's default with
 * OPFORGE_THREAD_POOL=halide). */
int opforge_set_num_threads(opforge_registry* reg, int n);

/* Whether calls check each scalar against its descriptor's declared domain (finite, or e.g.
 * beta in [0, 1)) and fail naming it; on (1) by default, 0 turns the checks off for this
 * process (experiments outside the domains). */
void opforge_set_scalar_checks(int enabled);

/* Precision dumps: while dir is set, every kernel call in the process writes its inputs,
 * scalars and outputs under dir (for `opforge check --replay dir`); NULL or "" turns it off.
 * 1 and opforge_last_error() when dir cannot be created. opforge_dump_dir: the directory, ""
 * when off (valid until the next call of either). */
int opforge_set_dump_dir(const char* dir);
const char* opforge_dump_dir(void);

#ifdef __cplusplus
}
#endif

#endif /* OPFORGE_OPFORGE_H */
