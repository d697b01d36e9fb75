// The table of the optimizer formulas the kernels compile: names, state tables and
// hyper-parameters, by position. Python uses a kernel only where its entry equals the
// registry's (graphemb/optim/functional.py), formula by formula.
#pragma once

#include <cstdint>
#include <vector>

namespace ge {

// Shapes of a per-row state table, as graphemb.optim.functional names them.
enum class StateKind { kElement, kRow, kCount };

struct StateSpec {
  const char* key;
  StateKind kind;
};

struct FormulaSpec {
  const char* name;
  std::vector<StateSpec> state;
  std::vector<const char*> hyper;
};

enum FormulaId : int { kSgd = 0, kAdagrad = 1, kRowwiseAdagrad = 2, kAdam = 3 };

const std::vector<FormulaSpec>& formula_table();

}  // namespace ge
