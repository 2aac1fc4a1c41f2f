//! The built-in kernel registry: every kernel of `kernels/` registered once
//! ([`builtin_registry`]), with the internal kernels of generated backward graphs. Layer: above
//! the kernels and the kernel interface (`kernel`); below planning (session, control flow,
//! functions, gradient), which looks kernels up here.

use std::sync::OnceLock;

use crate::kernel::KernelRegistry;

impl KernelRegistry {
    /// A registry with every kernel of this crate.
    pub fn with_builtin_kernels() -> Self {
        let mut reg = Self::new();
        crate::kernels::register_all(&mut reg);
        crate::kernels::backward::register_all(&mut reg);
        reg
    }
}

/// The registry with all built-in kernels, built once.
pub fn builtin_registry() -> &'static KernelRegistry {
    static REGISTRY: OnceLock<KernelRegistry> = OnceLock::new();
    REGISTRY.get_or_init(KernelRegistry::with_builtin_kernels)
}
