// halide_malloc / halide_free for the shared Halide runtime: a few freed blocks kept per thread
// for the next allocation.
//
// Kernels heap-allocate what they compute per call or per parallel task (matmul's packed
// panels and tiles, 128-450 KB each, once per tile). With Halide's default (malloc + free),
// glibc gives freed memory at the top of a heap back to the OS (trim) and serves large blocks
// with mmap/munmap, so every call page-faults the same pages in again: AVX2 matmul at 1024^3
// took ~1200 page faults per call, 8 x 512^3 ~2500. Here a thread's freed blocks go to its own
// cache (at most kBlocks blocks and kBytes bytes; blocks over kMaxBlock are freed at once) and
// its next allocation of at most a cached block's capacity takes the best fit. Blocks up to 64
// MB are kept: the convolutions' whole-input copies (compute_root) reach 11 MB at the UNet's
// 320@64 with batch 2, and with a cap of 8 MB such a block went back to glibc every call and
// its pages were faulted in again by the next (2026-12-05, AMD EPYC family 26 model 2, 2
// threads, `opforge bench conv2d --attr algorithm=direct_oc_blocked`, 2x320x64x64 -> 320 3x3
// stride 2: 32.7 ms against 12.9 ms with the block kept, oneDNN 11.6-12.1 ms). No locks: a block
// freed by another thread than the one that allocated it goes to the freeing thread's cache. A
// thread's cache is freed when the thread exits.
//
// Registry::runtime_handle installs these (halide_set_custom_malloc/free) when it loads the
// runtime, before any kernel runs; OPFORGE_HALIDE_MALLOC=system keeps Halide's default.
#pragma once

#include <cstddef>

namespace opforge::halide_alloc {

constexpr int kBlocks = 8;                      // blocks cached per thread
constexpr size_t kBytes = size_t(64) << 20;     // bytes cached per thread
constexpr size_t kMaxBlock = size_t(64) << 20;  // larger blocks are never cached
constexpr size_t kAlignment = 64;               // of every pointer returned

// halide_malloc_t / halide_free_t. `previous_free` (what halide_set_custom_free returned) frees
// a pointer these did not allocate; null: such a pointer is not expected (tests).
void* allocate(void* user_context, size_t bytes);
void release(void* user_context, void* ptr);
void set_previous_free(void (*previous_free)(void*, void*));

// The calling thread's cache: blocks and bytes held, and freeing them all (tests).
int cached_blocks();
size_t cached_bytes();
void trim();

}  // namespace opforge::halide_alloc
