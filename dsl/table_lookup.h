// Lookups into small constant tables as vector permutes (vpermps / vpermd, AVX-512's
// vpermi2ps / vpermi2d), which Halide 14 does not emit on x86: a lookup is a call of a function of
// dsl/table_lookup.c, compiled to bitcode per ISA with the project and linked into the
// kernels that call it (link_table_lookups). Without it Halide compiles a lookup as a gather,
// 16 scalar loads per AVX-512 vector; the other way is a chain of compares and selects.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <vector>

namespace opforge::dsl {

// Which permutes a target has: none (scalar or non-x86 targets, and the fp64 golden),
// AVX2's 8-entry vpermps / vpermd, or AVX-512's as well as 32-entry vpermi2ps / vpermi2d.
enum class Permutes { none, avx2, avx512 };

Permutes permutes_of(const Halide::Target& t);

// Whether t has AVX-512 at the skylake level (VL, DQ), which dsl/table_lookup.c's reciprocal
// estimate (opforge_rcp14, called by dsl/math.cpp's lower_fp32_math) needs.
bool has_rcp14(const Halide::Target& t);

// table[index] for an Int(32) index, any lane count. Float or int32 entries (every Expr one
// constant of the same type). Up to 8 entries with Permutes::avx2, up to 32 with avx512 (larger
// tables: split by the caller, see lookup_float). Only the index's low 3 bits (up to 8 entries)
// or 5 bits are read, in the vector and the scalar forms alike, so callers need not mask it;
// past the table's end within that range the last entry repeats.
Halide::Expr table_lookup(const std::vector<Halide::Expr>& table, const Halide::Expr& index);

// table[index] for any table size with Permutes::avx512 (32-entry lookups joined by selects on
// the index's higher bits), fp32 entries.
Halide::Expr lookup_float(const std::vector<float>& table, const Halide::Expr& index);

// Row j of the transpose of a 16 x 16 block, for AVX-512 targets (the matmul's pack of a
// transposed B): `rows` the block's 16 rows, each a dense vector when vectorized 16-wide (lane l
// of rows[i] is element (i, l)), and `self` the caller's Expr for lane l's result, element
// (l, j), which is what a scalar evaluation returns. Vectorized 16-wide with j = 0 .. 15 constant
// in one block (an unrolled loop), LLVM shares one transpose network among the 16 calls: 64
// shuffles per 256 elements, where Halide emits a gather or 16 scalar stores per vector. Wider
// vectors must hold whole blocks (Halide splits them into 16-lane calls); narrower ones return
// `self` (its gather).
Halide::Expr transposed_lane(const Halide::Expr& j, const Halide::Expr& self,
                             const std::vector<Halide::Expr>& rows);

// Appends the lookups' bitcode to a module that calls them (a no-op for one that does not);
// throws std::logic_error if its target lacks the permutes the calls need.
void link_table_lookups(Halide::Module& m);

// The bitcode linked for t (empty when t has no permutes). Built from the project's sources, it
// is in the dsl/ fingerprint and so in every kernel's cache key.
const std::vector<uint8_t>& table_lookup_bitcode(const Halide::Target& t);

}  // namespace opforge::dsl
