// The rule language: an optimizer written as a small line-oriented text file.
//
//   # comment to end of line
//   optimizer sign_sqrt_momentum          first line: the op's name, ^[a-z][a-z0-9_]{0,63}$
//     state var, m                        tensors updated in place
//     input grad                          tensors read only (gradients)
//     hyper lr = 0.01 "learning rate"     run-time fp32 scalar with a default (and a description)
//     attr  nesterov = false "..."        compile-time: true / false, or a number
//     storage f32, bf16m                  tensor storages built (default f32; q8s, q8ls: 8-bit
//                                         states, blockwise, for those `quantizable` names)
//     quantizable m signed                states an 8-bit storage quantizes (signed / unsigned map)
//     loss_scaling                        grad_scaling(): unscale / skip_if_nonfinite variants
//     sparse                              also sparse_<name>, the indexed-row form
//     autoschedule avx512                 Adams2019 twins "<variant>__auto" (bare: every ISA)
//     let   g = sign(grad) * sqrt(abs(grad))
//     m   = 0.9 * m + g                   updates, one per state, after all declarations
//     var = var - lr * select(nesterov, 0.9 * m + g, m)
//
// Names are declared before use, and are distinct (keywords and built-in function names are
// not names). A let may use earlier lets. Updates are simultaneous: each reads the OLD values.
//
// Expressions, loosest first: ||, &&, comparisons (< <= > >= == !=, not chained), + -, * /,
// unary - and !, then numbers (1, 0.5, 1e-8, .5), names, calls and parentheses. Built-ins:
// select(c, a, b), min, max, abs, sign, sqrt, rsqrt, exp, log, pow(a, b), clamp(x, lo, hi),
// and the whole-tensor reductions norm2(x) and sum(x) (not nested in one another). Comparisons,
// &&, || and ! give booleans; select's condition is a boolean; updates are numbers.
#pragma once

#include <string>

#include "dsl/rules/diagnostics.h"
#include "dsl/rules/rule_ast.h"

namespace opforge::dsl::rules {

// Parses and checks a rule file; throws RuleError at the first error (filename is only used in
// the message).
Rule parse_rule(const std::string& text, const std::string& filename);

// The storage tags a `storage` line may list: dsl::Storage's (the parser does not link the
// DSL; tests/registry/builder checks that each is a tag Storage::from_tag reads).
const std::vector<std::string>& storage_tags();

// The ISAs an `autoschedule` line may name: those every rule is built for (tests/registry/builder
// checks them against the builder's list).
const std::vector<std::string>& isa_names();

// The rule printed back in one canonical form, for cache keys: independent of whitespace,
// comments, declaration interleaving and redundant parentheses; any other edit changes it
// (numbers are printed with %.17g, which round-trips doubles). It parses back to the same rule.
std::string canonical_rule_text(const Rule& rule);

}  // namespace opforge::dsl::rules
