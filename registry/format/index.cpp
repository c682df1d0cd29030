// The registry index (index.json): JSON <-> Index, with its checks.
#include <set>

#include "opforge/sha256.h"
#include "registry/format/format_json.h"

namespace opforge::registry {

using namespace detail;

namespace {

IndexEntry parse_index_entry(const std::string& origin, const json& j, const std::string& ptr) {
  Obj o(origin, j, ptr);
  IndexEntry e;
  e.variant = ident(o, "variant");
  e.op = checked_name(o, "op", is_valid_op_name, "op name (^[a-z][a-z0-9_]{0,63}$)");
  e.descriptor = safe_path(o, "descriptor");
  e.isa = ident(o, "isa");
  e.attrs = string_map(origin, *o.field("attrs", true), o.at("attrs"));
  e.sha256 = opt_sha256(o, "sha256");
  o.finish();
  return e;
}

void check_index(const Index& idx, const std::string& origin) {
  std::set<std::string> variants, files;
  for (size_t i = 0; i < idx.variants.size(); ++i) {
    const IndexEntry& e = idx.variants[i];
    std::string ptr = child("/variants", i);
    if (!variants.insert(e.variant).second) {
      fail(origin, child(ptr, "variant"), "duplicate variant " + quote(e.variant));
    }
    if (!files.insert(e.descriptor).second) {
      fail(origin, child(ptr, "descriptor"),
           "descriptor " + quote(e.descriptor) + " is listed twice");
    }
  }
}

}  // namespace

namespace {

// The index without its own digest: what the digest covers.
ojson index_json(const Index& idx) {
  ojson j;
  j["schema"] = Index::kSchema;
  j["runtime_library"] = idx.runtime_library;
  if (!idx.runtime_sha256.empty()) j["runtime_sha256"] = idx.runtime_sha256;
  j["halide_version"] = idx.halide_version;
  j["variants"] = ojson::array();
  for (const IndexEntry& e : idx.variants) {
    ojson je;
    je["variant"] = e.variant;
    je["op"] = e.op;
    je["descriptor"] = e.descriptor;
    je["isa"] = e.isa;
    je["attrs"] = ojson::object();
    for (const auto& [k, v] : e.attrs) je["attrs"][k] = v;
    if (!e.sha256.empty()) je["sha256"] = e.sha256;
    j["variants"].push_back(je);
  }
  return j;
}

}  // namespace

std::string index_digest(const Index& idx) {
  return sha256_hex(dump(index_json(idx), "index"));
}

std::string to_json(const Index& idx) {
  ojson j = index_json(idx);
  j["sha256"] = sha256_hex(dump(j, "index"));
  return dump(j, "index");
}

Index index_from_json(const std::string& text, const std::string& origin) {
  json root = parse_text(text, origin);
  Obj o(origin, root, "");
  Index idx;
  check_schema(o, Index::kSchema);
  idx.runtime_library = safe_path(o, "runtime_library");
  idx.runtime_sha256 = opt_sha256(o, "runtime_sha256");
  idx.halide_version = o.str("halide_version");
  idx.variants = parse_array(o, "variants", parse_index_entry);
  const std::string digest = opt_sha256(o, "sha256");
  o.finish();
  check_index(idx, origin);
  // Last, so that a malformed index gets the error that says where. Its content, not its
  // bytes: whitespace and key order may change; a flipped attr, ISA or digest may not.
  if (!digest.empty() && digest != index_digest(idx)) {
    fail(origin, "/sha256",
         "the index's content does not match its SHA-256: damaged or edited; rebuild the "
         "registry (opforge build)");
  }
  return idx;
}

}  // namespace opforge::registry
