//! The tree-walking evaluator. OWNER: evaluator helper.
