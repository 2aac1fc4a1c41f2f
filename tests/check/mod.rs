//! The default check on models it used to refuse: shape-constrained models whose default dims
//! break them (a generated batch), models with onnxruntime's contrib ops (checked, and their
//! outputs equal to onnxruntime's), and models with ops the interpreter cannot run (checked
//! around them).

mod constrained;
mod contrib;
