// The formula table (formulas.h) and its description at the C interface.

#include "optim/formulas.h"

#include "graphemb_kernels.h"

#include <string>

namespace ge {

const std::vector<FormulaSpec>& formula_table() {
  static const std::vector<FormulaSpec> table = {
      {"sgd", {}, {"lr"}},
      {"adagrad", {{"sum", StateKind::kElement}}, {"lr", "eps"}},
      {"rowwise_adagrad", {{"sum", StateKind::kRow}}, {"lr", "eps"}},
      {"adam",
       {{"exp_avg", StateKind::kElement},
        {"exp_avg_sq", StateKind::kElement},
        {"step", StateKind::kCount}},
       {"lr", "beta1", "beta2", "eps"}},
  };
  return table;
}

namespace {

const char* kind_name(StateKind kind) {
  switch (kind) {
    case StateKind::kElement: return "element";
    case StateKind::kRow: return "row";
    default: return "count";
  }
}

// "name;key:kind,...;hyper,..." of every formula, made once.
const std::vector<std::string>& specs() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> texts;
    for (const FormulaSpec& spec : formula_table()) {
      std::string text = std::string(spec.name) + ";";
      for (size_t i = 0; i < spec.state.size(); ++i) {
        text += (i ? "," : "") + std::string(spec.state[i].key) + ":" +
                kind_name(spec.state[i].kind);
      }
      text += ";";
      for (size_t i = 0; i < spec.hyper.size(); ++i) text += (i ? "," : "") + std::string(spec.hyper[i]);
      texts.push_back(text);
    }
    return texts;
  }();
  return all;
}

}  // namespace
}  // namespace ge

extern "C" {

int ge_formula_count(void) { return static_cast<int>(ge::formula_table().size()); }

const char* ge_formula_spec(int formula) {
  const auto& all = ge::specs();
  if (formula < 0 || formula >= static_cast<int>(all.size())) return "";
  return all[formula].c_str();
}

}  // extern "C"
