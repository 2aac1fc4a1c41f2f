//! The error type of onnx-text: a parse error with its position (1-based line and column),
//! what went wrong as a structured kind, and a rendering with the source line and a caret.

use std::fmt;

/// What went wrong while parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    /// A token other than the one the grammar needs here.
    #[error("expected {expected}, found {found}")]
    Expected { expected: String, found: String },
    /// A character that starts no token.
    #[error("unexpected character {0:?}")]
    UnexpectedChar(char),
    /// A string literal without its closing quote.
    #[error("string literal is not closed")]
    UnterminatedString,
    /// A malformed escape in a string literal (`\x` needs two hex digits).
    #[error("malformed escape in string literal: {0}")]
    BadEscape(String),
    /// A number that does not parse as the kind of value expected here.
    #[error("malformed {kind} literal `{text}`")]
    BadNumber { kind: &'static str, text: String },
    /// A number that does not fit the type it is stored as.
    #[error("{text} does not fit {target}")]
    OutOfRange { text: String, target: String },
    /// A word that is not an element type, attribute type or keyword where one is needed.
    #[error("unknown {what} `{word}`")]
    Unknown { what: &'static str, word: String },
    /// An attribute value whose type differs from the declared one.
    #[error("attribute `{attribute}`: declared {declared}, but the value is {found}")]
    AttributeType {
        attribute: String,
        declared: String,
        found: String,
    },
    /// A list attribute `[]` with no type annotation, or a list for a single-valued type.
    #[error("attribute `{attribute}`: {reason}")]
    AttributeValue { attribute: String, reason: String },
    /// A tensor value that does not fit its declared type or shape.
    #[error("tensor `{tensor}`: {reason}")]
    Tensor { tensor: String, reason: String },
    /// Tensor data that the printer elided (`...`) cannot be read back.
    #[error("tensor `{0}`: its data was elided (`...`) when printed and cannot be parsed back")]
    ElidedTensor(String),
    /// An annotation (`#@` line) somewhere annotations do not attach.
    #[error("annotation (`#@`) not allowed here: annotations go on the lines before a model, graph, node, attribute, value, tensor or function")]
    MisplacedAnnotation,
    /// An annotation key this element does not have.
    #[error("unknown {element} annotation `{key}` (known: {known})")]
    UnknownAnnotation {
        element: &'static str,
        key: String,
        known: &'static str,
    },
    /// The same annotation key twice on one element.
    #[error("annotation `{0}` given twice")]
    DuplicateAnnotation(String),
    /// An annotation that contradicts the text it annotates.
    #[error("annotation `{key}`: {reason}")]
    AnnotationConflict { key: String, reason: String },
    /// Nesting (graphs in attributes, nested types) deeper than the parser allows.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    /// Text after the end of what was parsed.
    #[error("unexpected {0} after the end of the input")]
    TrailingInput(String),
}

/// A parse error at a position in the input text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line of the error.
    pub line: usize,
    /// 1-based column (in characters) of the error.
    pub column: usize,
    /// What went wrong.
    pub kind: ParseErrorKind,
    /// The text of the line the error is on (without its line break).
    pub source_line: String,
}

impl ParseError {
    /// Builds the error for a byte offset into `input`.
    pub(crate) fn at_offset(input: &str, offset: usize, kind: ParseErrorKind) -> Self {
        let offset = offset.min(input.len());
        let before = input.get(..offset).unwrap_or(input);
        let line_start = before.rfind('\n').map_or(0, |p| p + 1);
        let line = before.matches('\n').count() + 1;
        let column = input
            .get(line_start..offset)
            .map_or(1, |s| s.chars().count() + 1);
        let line_end = input
            .get(line_start..)
            .and_then(|rest| rest.find('\n'))
            .map_or(input.len(), |p| line_start + p);
        let source_line = input
            .get(line_start..line_end)
            .unwrap_or("")
            .trim_end_matches('\r')
            .to_string();
        ParseError {
            line,
            column,
            kind,
            source_line,
        }
    }

    /// The message without the position.
    pub fn message(&self) -> String {
        self.kind.to_string()
    }

    /// A multi-line rendering: position and message, the source line, and a caret under the
    /// column.
    ///
    /// ```text
    /// error at line 2, column 13: expected `)`, found `=`
    ///   |
    /// 2 | g (float[N] X = ) => (Y) { Y = Relu(X) }
    ///   |             ^
    /// ```
    pub fn render(&self) -> String {
        let number = self.line.to_string();
        let gutter = " ".repeat(number.len());
        let caret_pad: String = self
            .source_line
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!(
            "error at line {}, column {}: {}\n{gutter} |\n{number} | {}\n{gutter} | {caret_pad}^",
            self.line, self.column, self.kind, self.source_line
        )
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.kind
        )
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_and_rendering() {
        let input = "a\nbc d\n";
        let e = ParseError::at_offset(input, 5, ParseErrorKind::UnexpectedChar('d'));
        assert_eq!((e.line, e.column), (2, 4));
        assert_eq!(e.source_line, "bc d");
        assert_eq!(
            e.render(),
            "error at line 2, column 4: unexpected character 'd'\n  |\n2 | bc d\n  |    ^"
        );
        let end = ParseError::at_offset(input, 99, ParseErrorKind::UnterminatedString);
        assert_eq!((end.line, end.column, end.source_line.as_str()), (3, 1, ""));
    }
}
