#include "dsl/table_lookup.h"

#include <stdexcept>
#include <string>

namespace opforge::dsl {

// dsl/table_lookup.c compiled per ISA, embedded by the build (dsl/CMakeLists.txt).
namespace table_lookup_bitcode_data {
extern const unsigned char avx2[], avx512[];
extern const unsigned long avx2_size, avx512_size;
}  // namespace table_lookup_bitcode_data

namespace {

const char kPrefix[] = "opforge_lut";
const char kTransposePrefix[] = "opforge_tr16";
const char kReciprocalPrefix[] = "opforge_rcp14";      // dsl/math.cpp's AVX-512 estimate
const char kPrefetchPrefix[] = "opforge_prefetch_t0";  // dsl/output_prefetch.cpp's inputs

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Does a lowered function call a lookup, transpose or reciprocal, and one that only AVX-512
// has (32-entry lookups, the 16 x 16 transpose, the reciprocal)?
class FindsLookups : public Halide::Internal::IRVisitor {
 public:
  bool found = false, wide = false;

 private:
  using IRVisitor::visit;
  void visit(const Halide::Internal::Call* op) override {
    const bool avx512_only =
        starts_with(op->name, kTransposePrefix) || starts_with(op->name, kReciprocalPrefix);
    if (avx512_only || starts_with(op->name, kPrefix) || op->name == kPrefetchPrefix) {
      found = true;
      wide = wide || avx512_only || starts_with(op->name, std::string(kPrefix) + "32");
    }
    IRVisitor::visit(op);
  }
};

std::vector<uint8_t> bytes(const unsigned char* data, unsigned long size) {
  return std::vector<uint8_t>(data, data + size);
}

}  // namespace

Permutes permutes_of(const Halide::Target& t) {
  if (t.arch != Halide::Target::X86 || t.bits != 64) return Permutes::none;
  // Any AVX-512 level (a target may name one without the base feature): vpermi2ps is AVX512F.
  for (auto f : {Halide::Target::AVX512, Halide::Target::AVX512_KNL, Halide::Target::AVX512_Skylake,
                 Halide::Target::AVX512_Cannonlake, Halide::Target::AVX512_SapphireRapids}) {
    if (t.has_feature(f)) return Permutes::avx512;
  }
  if (t.has_feature(Halide::Target::AVX2)) return Permutes::avx2;
  return Permutes::none;
}

bool has_rcp14(const Halide::Target& t) {
  return t.arch == Halide::Target::X86 && t.bits == 64 &&
         t.has_feature(Halide::Target::AVX512_Skylake);
}

Halide::Expr table_lookup(const std::vector<Halide::Expr>& table, const Halide::Expr& index) {
  if (table.empty() || table.size() > 32 || !index.type().is_int() || index.type().bits() != 32) {
    throw std::invalid_argument("table_lookup: 1 to 32 entries and an Int(32) index");
  }
  const Halide::Type t = table[0].type();
  const bool wide = table.size() > 8;
  if (t != Halide::Float(32) && t != Halide::Int(32)) {
    throw std::invalid_argument("table_lookup: fp32 or int32 entries");
  }
  std::vector<Halide::Expr> args = {index};
  for (const Halide::Expr& e : table) {
    if (e.type() != t) throw std::invalid_argument("table_lookup: entries of one type");
    args.push_back(e);
  }
  // Unused entries: the table's last value (never picked while the index is in range).
  while (args.size() < (wide ? 33u : 9u)) args.push_back(table.back());
  const std::string name = std::string(kPrefix) + (wide ? "32" : "8") + (t.is_float() ? "f" : "i");
  return Halide::Internal::Call::make(t, name, args, Halide::Internal::Call::PureExtern);
}

Halide::Expr lookup_float(const std::vector<float>& table, const Halide::Expr& index) {
  // Slices of 32 entries, then a binary tree of selects on bits 5, 6, ... of the index.
  std::vector<Halide::Expr> level;
  for (size_t s = 0; s < table.size(); s += 32) {
    std::vector<Halide::Expr> slice;
    for (size_t k = s; k < std::min(table.size(), s + 32); ++k) slice.push_back(table[k]);
    level.push_back(table_lookup(slice, index));  // its low 5 bits
  }
  for (int bit = 5; level.size() > 1; ++bit) {
    std::vector<Halide::Expr> next;
    for (size_t k = 0; k < level.size(); k += 2) {
      next.push_back(k + 1 < level.size()
                         ? Halide::select((index & (1 << bit)) != 0, level[k + 1], level[k])
                         : level[k]);
    }
    level = next;
  }
  return level[0];
}

Halide::Expr transposed_lane(const Halide::Expr& j, const Halide::Expr& self,
                             const std::vector<Halide::Expr>& rows) {
  if (rows.size() != 16 || self.type() != Halide::Float(32) || j.type() != Halide::Int(32)) {
    throw std::invalid_argument("transposed_lane: 16 fp32 rows, an fp32 self and an Int(32) j");
  }
  std::vector<Halide::Expr> args = {j, self};
  for (const Halide::Expr& r : rows) {
    if (r.type() != Halide::Float(32)) throw std::invalid_argument("transposed_lane: fp32 rows");
    args.push_back(r);
  }
  return Halide::Internal::Call::make(Halide::Float(32), std::string(kTransposePrefix) + "f", args,
                                      Halide::Internal::Call::PureExtern);
}

const std::vector<uint8_t>& table_lookup_bitcode(const Halide::Target& t) {
  namespace data = table_lookup_bitcode_data;
  static const std::vector<uint8_t> none, avx2 = bytes(data::avx2, data::avx2_size),
                                          avx512 = bytes(data::avx512, data::avx512_size);
  switch (permutes_of(t)) {
    case Permutes::avx512:
      return avx512;
    case Permutes::avx2:
      return avx2;
    case Permutes::none:
      break;
  }
  return none;
}

void link_table_lookups(Halide::Module& m) {
  FindsLookups finder;
  for (const Halide::Internal::LoweredFunc& f : m.functions()) f.body.accept(&finder);
  if (!finder.found) return;
  const std::vector<uint8_t>& code = table_lookup_bitcode(m.target());
  // Either would leave a call LLVM cannot resolve in the kernel (AVX2's bitcode has no 32-entry
  // lookup).
  if (code.empty() || (finder.wide && permutes_of(m.target()) != Permutes::avx512)) {
    throw std::logic_error(m.name() + ": calls " + (finder.wide ? "AVX-512 " : "") +
                           "table lookups, transposes or reciprocals but its target " +
                           m.target().to_string() + " has no such instructions");
  }
  m.append(Halide::ExternalCode::bitcode_wrapper(m.target(), code, "opforge.table_lookup"));
}

}  // namespace opforge::dsl
