//! The parser: reads the syntax onnx 1.23.2's parser reads (`onnx.parser`), producing the
//! same protos for the same text, plus this crate's annotations and extensions.
//!
//! A recursive-descent parser over the on-demand lexer. Annotation blocks are parsed by a
//! nested parser over their content; its errors are mapped back to the original text.

mod annotation;
mod attribute;
mod graph;
mod tensor;
mod types;

use std::collections::VecDeque;

use onnx_proto::{FunctionProto, GraphProto, ModelProto, NodeProto};

use crate::defaults::Defaults;
use crate::error::{ParseError, ParseErrorKind};
use crate::lex::{AnnotationBlock, LexError, Lexer, Tok, Token};
use crate::number::{self, NumberError};

/// Parses a model: an optional `<...>` header, a graph, then model-local functions.
///
/// ```
/// let m = onnx_text::parse_model(
///     "<ir_version: 8, opset_import: [\"\" : 17]> g (float[N, 3] X) => (float[N, 3] Y) { Y = Relu(X) }",
/// ).unwrap();
/// assert_eq!(m.graph.unwrap().node[0].op_type.as_deref(), Some("Relu"));
/// ```
pub fn parse_model(text: &str) -> Result<ModelProto, ParseError> {
    run(text, |p| p.model())
}

/// Parses a graph: `name (inputs) => (outputs) <initializers, value infos> { nodes }`.
pub fn parse_graph(text: &str) -> Result<GraphProto, ParseError> {
    run(text, |p| {
        let blocks = p.take_annotation()?;
        p.graph(blocks)
    })
}

/// Parses a function: `<domain: ..., opset_import: [...]> name <attrs> (inputs) => (outputs) { nodes }`.
pub fn parse_function(text: &str) -> Result<FunctionProto, ParseError> {
    run(text, |p| {
        let blocks = p.take_annotation()?;
        p.function(blocks)
    })
}

/// Parses one node: `[name] outputs = domain.Op <attributes> (inputs)`.
pub fn parse_node(text: &str) -> Result<NodeProto, ParseError> {
    run(text, |p| {
        let blocks = p.take_annotation()?;
        p.node(blocks)
    })
}

fn run<T>(text: &str, f: impl FnOnce(&mut Parser<'_>) -> PResult<T>) -> Result<T, ParseError> {
    let mut p = Parser::new(text, Defaults::default(), 0);
    let result = f(&mut p).and_then(|v| {
        let t = p.next_any()?;
        match t.tok {
            Tok::Eof => Ok(v),
            Tok::Annotation(_) => Err(Fail {
                offset: t.start,
                kind: ParseErrorKind::MisplacedAnnotation,
            }),
            other => Err(Fail {
                offset: t.start,
                kind: ParseErrorKind::TrailingInput(other.describe()),
            }),
        }
    });
    result.map_err(|f| ParseError::at_offset(text, f.offset, f.kind))
}

/// A failure at a byte offset of the parser's own input.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fail {
    pub offset: usize,
    pub kind: ParseErrorKind,
}

impl From<LexError> for Fail {
    fn from(e: LexError) -> Self {
        Fail {
            offset: e.offset,
            kind: e.kind,
        }
    }
}

pub(crate) type PResult<T> = Result<T, Fail>;

/// How deep graphs (in attributes and annotations) and types may nest.
pub(crate) const MAX_DEPTH: usize = 64;

pub(crate) struct Parser<'a> {
    lexer: Lexer<'a>,
    ahead: VecDeque<Token<'a>>,
    /// The presence defaults in force.
    pub(crate) scope: Defaults,
    /// Current nesting depth.
    pub(crate) depth: usize,
    /// Where the last consumed token started (the position of errors at the end).
    last_start: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(input: &'a str, scope: Defaults, depth: usize) -> Self {
        Parser {
            lexer: Lexer::new(input),
            ahead: VecDeque::new(),
            scope,
            depth,
            last_start: 0,
        }
    }

    #[inline]
    fn fill(&mut self, n: usize) -> PResult<()> {
        if self.ahead.len() > n {
            return Ok(());
        }
        self.fill_slow(n)
    }

    fn fill_slow(&mut self, n: usize) -> PResult<()> {
        while self.ahead.len() <= n {
            let t = self.lexer.next_token()?;
            let eof = t.tok == Tok::Eof;
            self.ahead.push_back(t);
            if eof {
                break;
            }
        }
        Ok(())
    }

    /// The token `n` ahead (annotations included; past the end, the end).
    pub(crate) fn peek_nth(&mut self, n: usize) -> PResult<&Tok<'a>> {
        self.fill(n)?;
        let idx = n.min(self.ahead.len().saturating_sub(1));
        Ok(self.ahead.get(idx).map_or(&Tok::Eof, |t| &t.tok))
    }

    /// The next token (possibly an annotation, which no grammar rule matches: the rule then
    /// reports it through [`Parser::expected`]).
    pub(crate) fn peek(&mut self) -> PResult<&Tok<'a>> {
        self.peek_nth(0)
    }

    /// The offset of the next token.
    pub(crate) fn offset(&mut self) -> PResult<usize> {
        self.fill(0)?;
        Ok(self.ahead.front().map_or(self.last_start, |t| t.start))
    }

    /// Consumes any token (annotations included).
    fn next_any(&mut self) -> PResult<Token<'a>> {
        self.fill(0)?;
        match self.ahead.pop_front() {
            Some(t) => {
                self.last_start = t.start;
                Ok(t)
            }
            None => Ok(Token {
                tok: Tok::Eof,
                start: self.last_start,
            }),
        }
    }

    /// Consumes the next token; an annotation here is misplaced.
    pub(crate) fn next(&mut self) -> PResult<Token<'a>> {
        if let Tok::Annotation(_) = self.peek()? {
            return self.fail(ParseErrorKind::MisplacedAnnotation);
        }
        self.next_any()
    }

    /// Consumes the annotation blocks before an element.
    pub(crate) fn take_annotation(&mut self) -> PResult<Vec<AnnotationBlock>> {
        let mut blocks = Vec::new();
        loop {
            self.fill(0)?;
            if matches!(
                self.ahead.front(),
                Some(Token {
                    tok: Tok::Annotation(_),
                    ..
                })
            ) {
                if let Tok::Annotation(b) = self.next_any()?.tok {
                    blocks.push(*b);
                }
            } else {
                return Ok(blocks);
            }
        }
    }

    pub(crate) fn fail<T>(&mut self, kind: ParseErrorKind) -> PResult<T> {
        let offset = self.offset()?;
        Err(Fail { offset, kind })
    }

    pub(crate) fn fail_at<T>(&self, offset: usize, kind: ParseErrorKind) -> PResult<T> {
        Err(Fail { offset, kind })
    }

    /// An "expected X, found Y" failure at the next token.
    pub(crate) fn expected<T>(&mut self, what: &str) -> PResult<T> {
        if let Tok::Annotation(_) = self.peek()? {
            return self.fail(ParseErrorKind::MisplacedAnnotation);
        }
        let found = self.peek()?.describe();
        self.fail(ParseErrorKind::Expected {
            expected: what.to_string(),
            found,
        })
    }

    pub(crate) fn at(&mut self, c: u8) -> PResult<bool> {
        Ok(matches!(self.peek()?, Tok::Punct(x) if *x == c))
    }

    /// Consumes `c` if it is next.
    pub(crate) fn eat(&mut self, c: u8) -> PResult<bool> {
        if self.at(c)? {
            self.next()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    pub(crate) fn expect(&mut self, c: u8) -> PResult<()> {
        if self.eat(c)? {
            Ok(())
        } else {
            self.expected(&format!("`{}`", char::from(c)))
        }
    }

    pub(crate) fn expect_arrow(&mut self) -> PResult<()> {
        if *self.peek()? == Tok::Arrow {
            self.next()?;
            Ok(())
        } else {
            self.expected("`=>`")
        }
    }

    pub(crate) fn at_eof(&mut self) -> PResult<bool> {
        Ok(*self.peek_nth(0)? == Tok::Eof)
    }

    /// An identifier.
    pub(crate) fn ident(&mut self, what: &str) -> PResult<&'a str> {
        if let Tok::Ident(s) = *self.peek()? {
            self.next()?;
            Ok(s)
        } else {
            self.expected(what)
        }
    }

    /// A string literal that must be UTF-8 (names, doc strings, keys).
    pub(crate) fn string(&mut self, what: &str) -> PResult<String> {
        let offset = self.offset()?;
        match self.peek()? {
            Tok::Str(_) => {
                let Tok::Str(bytes) = self.next()?.tok else {
                    return self.expected(what);
                };
                utf8(bytes, offset)
            }
            _ => self.expected(what),
        }
    }

    /// A string literal as bytes (attribute strings, string tensors).
    pub(crate) fn bytes(&mut self, what: &str) -> PResult<Vec<u8>> {
        match self.peek()? {
            Tok::Str(_) => match self.next()?.tok {
                Tok::Str(bytes) => Ok(bytes),
                _ => self.expected(what),
            },
            _ => self.expected(what),
        }
    }

    /// An identifier or a string literal (onnx's `ParseQuotableIdentifier`).
    pub(crate) fn name(&mut self, what: &str) -> PResult<String> {
        match self.peek()? {
            Tok::Ident(s) => {
                let s = s.to_string();
                self.next()?;
                Ok(s)
            }
            Tok::Str(_) => self.string(what),
            _ => self.expected(what),
        }
    }

    /// onnx's `ParseOptionalQuotableIdentifier(id, found)`: a name, or nothing; "nothing"
    /// before a comma counts as an empty name.
    pub(crate) fn optional_name(&mut self) -> PResult<Option<String>> {
        match self.peek()? {
            Tok::Ident(_) | Tok::Str(_) => self.name("a name").map(Some),
            Tok::Punct(b',') => Ok(Some(String::new())),
            _ => Ok(None),
        }
    }

    /// onnx's `Parse(IdList)`: names separated by commas, possibly empty.
    pub(crate) fn name_list(&mut self) -> PResult<Vec<String>> {
        let mut names = Vec::new();
        let Some(first) = self.optional_name()? else {
            return Ok(names);
        };
        names.push(first);
        while self.eat(b',')? {
            match self.optional_name()? {
                Some(n) => names.push(n),
                None => break,
            }
        }
        Ok(names)
    }

    /// A signed literal: an optional `-`, then a number or a float word. Returns the sign,
    /// the text after it, and whether it is an integer literal.
    fn signed_literal(&mut self, what: &'static str) -> PResult<(bool, &'a str, bool)> {
        let negative = self.eat(b'-')?;
        let (text, is_int) = match *self.peek()? {
            Tok::Int(s) => (s, true),
            Tok::Float(s) => (s, false),
            Tok::Ident(s) if crate::names::is_float_word(s) => (s, false),
            _ => return self.expected(what),
        };
        self.next_any()?;
        Ok((negative, text, is_int))
    }

    /// A 64-bit integer literal.
    pub(crate) fn int(&mut self) -> PResult<i64> {
        let offset = self.offset()?;
        let (negative, text, is_int) = self.signed_literal("an integer")?;
        if !is_int {
            return self.number_error(
                offset,
                NumberError::Malformed,
                "integer",
                "int64",
                negative,
                text,
            );
        }
        number::parse_i64(negative, text)
            .or_else(|e| self.number_error(offset, e, "integer", "int64", negative, text))
    }

    /// An unsigned 64-bit integer literal.
    pub(crate) fn uint(&mut self) -> PResult<u64> {
        let offset = self.offset()?;
        let (negative, text, is_int) = self.signed_literal("an integer")?;
        if !is_int {
            return self.number_error(
                offset,
                NumberError::Malformed,
                "integer",
                "uint64",
                negative,
                text,
            );
        }
        number::parse_u64(negative, text)
            .or_else(|e| self.number_error(offset, e, "integer", "uint64", negative, text))
    }

    /// A float literal (integers, decimals, `nan`, `inf`, `nan(0x...)`).
    pub(crate) fn float(&mut self) -> PResult<f32> {
        let offset = self.offset()?;
        let (negative, text, _) = self.signed_literal("a number")?;
        number::parse_f32(negative, text)
            .or_else(|e| self.number_error(offset, e, "float", "float", negative, text))
    }

    /// A double literal.
    pub(crate) fn double(&mut self) -> PResult<f64> {
        let offset = self.offset()?;
        let (negative, text, _) = self.signed_literal("a number")?;
        number::parse_f64(negative, text)
            .or_else(|e| self.number_error(offset, e, "double", "double", negative, text))
    }

    fn number_error<T>(
        &self,
        offset: usize,
        e: NumberError,
        kind: &'static str,
        target: &str,
        negative: bool,
        text: &str,
    ) -> PResult<T> {
        let text = format!("{}{text}", if negative { "-" } else { "" });
        self.fail_at(
            offset,
            match e {
                NumberError::Malformed => ParseErrorKind::BadNumber { kind, text },
                NumberError::OutOfRange => ParseErrorKind::OutOfRange {
                    text,
                    target: target.to_string(),
                },
            },
        )
    }

    /// Enters one nesting level (graphs, types).
    pub(crate) fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return self.fail(ParseErrorKind::TooDeep(MAX_DEPTH));
        }
        self.depth += 1;
        Ok(())
    }

    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }
}

pub(crate) fn utf8(bytes: Vec<u8>, offset: usize) -> PResult<String> {
    String::from_utf8(bytes).map_err(|_| Fail {
        offset,
        kind: ParseErrorKind::BadEscape("this string must be valid UTF-8".to_string()),
    })
}
