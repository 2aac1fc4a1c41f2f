//! control (work in progress).
