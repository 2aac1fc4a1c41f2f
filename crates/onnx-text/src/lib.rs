//! The ONNX text syntax on the onnx-proto types: a printer and a parser, as `onnx.printer`
//! and `onnx.parser` (onnx 1.23.2), with a lossless round trip.
//!
//! - [`print_model`], [`print_graph`], [`print_function`], [`print_node`] write the syntax
//!   onnx's C++ printer writes, byte for byte where that printer is complete (it elides some
//!   tensor types as `...`; this one prints every element type).
//! - [`parse_model`], [`parse_graph`], [`parse_function`], [`parse_node`] read the syntax
//!   onnx's parser reads and give the same protos for the same text.
//! - Round trip: `parse_model(&print_model(m, &Default::default()))` equals
//!   [`normalize_for_text`]`(m)`, which is `m` itself for every well-formed model. What the
//!   standard syntax cannot say (absent versus empty fields, `raw_data` versus typed storage,
//!   doc strings, metadata, ...) travels in annotations: comment lines starting with `#@`,
//!   which onnx's parser skips. See [`syntax`] for the grammar and every extension.
//! - Errors: [`ParseError`] has the line, column, a structured [`ParseErrorKind`], and
//!   [`ParseError::render`] shows the source line with a caret.
//!
//! ```
//! let text = r#"<ir_version: 8, opset_import: ["" : 17]>
//! g (float[N, 3] X) => (float[N, 3] Y) { Y = Relu(X) }"#;
//! let model = onnx_text::parse_model(text).unwrap();
//! let printed = onnx_text::print_model(&model, &onnx_text::PrintOptions::default());
//! assert!(printed.contains("Y = Relu (X)"));
//! assert_eq!(onnx_text::parse_model(&printed).unwrap(), model);
//! ```

mod defaults;
mod error;
mod lex;
mod names;
mod normalize;
mod number;
mod parse;
mod print;
mod tensor_data;

#[doc = include_str!("../SYNTAX.md")]
pub mod syntax {}

pub use error::{ParseError, ParseErrorKind};
pub use normalize::normalize_for_text;
pub use parse::{parse_function, parse_graph, parse_model, parse_node};
pub use print::{print_function, print_graph, print_model, print_node, PrintOptions};
