//! onnxruntime's contrib operators (the `com.microsoft` domain, and the LayerNormalization and
//! SimplifiedLayerNormalization that onnxruntime registers in the default domain below opset 17),
//! registered by family. Each kernel is conformance-tested against onnxruntime's own outputs:
//! `scripts/gen_contrib_tests.py` writes the cases under `tests/data/contrib/<family>/`, and
//! `tests/interpreter/contrib.rs` tracks them in one manifest per family.

mod attention;
mod norm;
mod quant;

/// The contrib domain.
pub(crate) const MS: &str = "com.microsoft";

/// Registers every contrib kernel family.
pub fn register_all(reg: &mut crate::kernel::KernelRegistry) {
    norm::register_all(reg);
    attention::register_all(reg);
    quant::register_all(reg);
}
