//! Integration tests of onnx-schema against the embedded onnx 1.23.2 table: counts, lookup
//! semantics, attributes and defaults, type constraints and type strings, function bodies, and
//! `SchemaRegistry::from_json` on malformed tables.
//!
//! Expected values were read from onnx 1.23.2 itself (`onnx.defs.get_schema`, ...), not from
//! this crate; each table says so where it appears.

mod attributes;
mod from_json;
mod functions;
mod lookup;
mod type_strings;

use onnx_schema::{registry, OpSchema};

/// The schema `domain:op-since_version`, which must exist.
pub fn schema(domain: &str, op: &str, since_version: i64) -> &'static OpSchema {
    let found = registry()
        .versions(domain, op)
        .iter()
        .find(|s| s.since_version == since_version);
    match found {
        Some(s) => s,
        None => panic!("{domain}:{op}-{since_version} is missing from the registry"),
    }
}
