//! The lexer: identifiers, string literals, numbers, punctuation, `=>`, and annotation blocks.
//!
//! Whitespace is onnx's `IsSpace` set; `#` starts a comment to the end of the line. A comment
//! that starts with `#@` is an annotation: consecutive `#@` lines form one block whose
//! content is the lines with `#@` and one following space removed, joined by line breaks.
//! The block remembers where each of its lines came from, so errors inside an annotation
//! point at the original text.
//!
//! Tokens are produced on demand: a 100 MB model text is never held as a token vector.

use crate::error::ParseErrorKind;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok<'a> {
    Ident(&'a str),
    /// A string literal, unescaped (`\xHH` may make it non-UTF-8).
    Str(Vec<u8>),
    /// Digits only.
    Int(&'a str),
    /// Digits with a point or an exponent, or the `nan(0x...)` bit-pattern form.
    Float(&'a str),
    /// One of `< > ( ) [ ] { } , : = . ? @ -`.
    Punct(u8),
    /// `=>` (no space between).
    Arrow,
    Annotation(Box<AnnotationBlock>),
    Eof,
}

impl Tok<'_> {
    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Str(_) => "a string literal".to_string(),
            Tok::Int(s) | Tok::Float(s) => format!("`{s}`"),
            Tok::Punct(c) => format!("`{}`", char::from(*c)),
            Tok::Arrow => "`=>`".to_string(),
            Tok::Annotation(_) => "an annotation (`#@`)".to_string(),
            Tok::Eof => "the end of the input".to_string(),
        }
    }
}

/// A token and the byte offset it starts at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token<'a> {
    pub tok: Tok<'a>,
    pub start: usize,
}

/// The content of consecutive `#@` lines.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AnnotationBlock {
    pub content: String,
    /// For each content line: (offset in `content` where it starts, offset in the input).
    pub line_map: Vec<(usize, usize)>,
}

impl AnnotationBlock {
    /// Maps an offset in `content` to the offset in the input it came from.
    pub(crate) fn input_offset(&self, content_offset: usize) -> usize {
        let idx = self
            .line_map
            .partition_point(|(start, _)| *start <= content_offset)
            .saturating_sub(1);
        match self.line_map.get(idx) {
            Some((start, input)) => input + (content_offset - start.min(&content_offset)),
            None => 0,
        }
    }
}

/// A lexing failure at a byte offset.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LexError {
    pub offset: usize,
    pub kind: ParseErrorKind,
}

pub(crate) struct Lexer<'a> {
    input: &'a str,
    pos: usize,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(input: &'a str) -> Self {
        Lexer { input, pos: 0 }
    }

    fn byte(&self, at: usize) -> Option<u8> {
        self.input.as_bytes().get(at).copied()
    }

    fn slice(&self, from: usize, to: usize) -> &'a str {
        self.input.get(from..to).unwrap_or("")
    }

    /// Skips whitespace and plain comments; stops at an annotation.
    fn skip_space(&mut self) {
        while let Some(b) = self.byte(self.pos) {
            if is_space(b) {
                self.pos += 1;
            } else if b == b'#' && self.byte(self.pos + 1) != Some(b'@') {
                self.pos = self.line_end(self.pos);
            } else {
                break;
            }
        }
    }

    fn line_end(&self, from: usize) -> usize {
        self.input
            .get(from..)
            .and_then(|rest| rest.find('\n'))
            .map_or(self.input.len(), |p| from + p)
    }

    pub(crate) fn next_token(&mut self) -> Result<Token<'a>, LexError> {
        self.skip_space();
        let start = self.pos;
        let Some(b) = self.byte(start) else {
            return Ok(Token {
                tok: Tok::Eof,
                start,
            });
        };
        let tok = match b {
            b'#' => Tok::Annotation(Box::new(self.annotation())),
            b'"' => Tok::Str(self.string()?),
            b'0'..=b'9' => self.number(),
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => self.identifier(),
            b'=' if self.byte(start + 1) == Some(b'>') => {
                self.pos += 2;
                Tok::Arrow
            }
            b'<' | b'>' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b',' | b':' | b'=' | b'.'
            | b'?' | b'@' | b'-' => {
                self.pos += 1;
                Tok::Punct(b)
            }
            _ => {
                let c = self
                    .input
                    .get(start..)
                    .and_then(|s| s.chars().next())
                    .unwrap_or('\u{fffd}');
                return Err(LexError {
                    offset: start,
                    kind: ParseErrorKind::UnexpectedChar(c),
                });
            }
        };
        Ok(Token { tok, start })
    }

    fn annotation(&mut self) -> AnnotationBlock {
        let mut block = AnnotationBlock {
            content: String::new(),
            line_map: Vec::new(),
        };
        loop {
            // At `#@`.
            let mut from = self.pos + 2;
            if self.byte(from) == Some(b' ') {
                from += 1;
            }
            let end = self.line_end(from);
            block.line_map.push((block.content.len(), from));
            block.content.push_str(self.slice(from, end));
            self.pos = end;
            // A following line that starts (after blanks) with `#@` continues the block.
            let mut next = end + 1;
            while matches!(self.byte(next), Some(b' ' | b'\t' | b'\r' | 0x0b | 0x0c)) {
                next += 1;
            }
            if self.byte(end) == Some(b'\n')
                && self.byte(next) == Some(b'#')
                && self.byte(next + 1) == Some(b'@')
            {
                block.content.push('\n');
                self.pos = next;
            } else {
                return block;
            }
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, LexError> {
        let start = self.pos;
        let bytes = self.input.as_bytes();
        let mut i = start + 1;
        // Unescaped runs are copied whole.
        let mut out: Vec<u8> = Vec::new();
        let mut seg = i;
        loop {
            match bytes.get(i) {
                None => {
                    return Err(LexError {
                        offset: start,
                        kind: ParseErrorKind::UnterminatedString,
                    })
                }
                Some(b'"') => {
                    out.extend_from_slice(bytes.get(seg..i).unwrap_or(&[]));
                    self.pos = i + 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    out.extend_from_slice(bytes.get(seg..i).unwrap_or(&[]));
                    match bytes.get(i + 1) {
                        None => {
                            return Err(LexError {
                                offset: start,
                                kind: ParseErrorKind::UnterminatedString,
                            })
                        }
                        Some(b'x') => {
                            let hex = bytes.get(i + 2..i + 4).unwrap_or(&[]);
                            let value = std::str::from_utf8(hex)
                                .ok()
                                .filter(|h| h.len() == 2)
                                .and_then(|h| u8::from_str_radix(h, 16).ok());
                            match value {
                                Some(v) => {
                                    out.push(v);
                                    i += 4;
                                }
                                None => {
                                    return Err(LexError {
                                        offset: i,
                                        kind: ParseErrorKind::BadEscape(
                                            "`\\x` needs two hex digits".to_string(),
                                        ),
                                    })
                                }
                            }
                        }
                        Some(_) => {
                            // Any other escaped character stands for itself (as onnx's
                            // parser); it may be the first byte of a multi-byte character.
                            let ch_len = self
                                .input
                                .get(i + 1..)
                                .and_then(|s| s.chars().next())
                                .map_or(1, char::len_utf8);
                            out.extend_from_slice(bytes.get(i + 1..i + 1 + ch_len).unwrap_or(&[]));
                            i += 1 + ch_len;
                        }
                    }
                    seg = i;
                }
                Some(_) => i += 1,
            }
        }
    }

    fn number(&mut self) -> Tok<'a> {
        let start = self.pos;
        let mut i = start;
        let mut float = false;
        while let Some(b) = self.byte(i) {
            if b.is_ascii_digit() {
                i += 1;
            } else if b == b'.' && !float {
                float = true;
                i += 1;
            } else {
                break;
            }
        }
        if matches!(self.byte(i), Some(b'e' | b'E')) {
            float = true;
            i += 1;
            if matches!(self.byte(i), Some(b'+' | b'-')) {
                i += 1;
            }
            while self.byte(i).is_some_and(|b| b.is_ascii_digit()) {
                i += 1;
            }
        }
        self.pos = i;
        let text = self.slice(start, i);
        if float {
            Tok::Float(text)
        } else {
            Tok::Int(text)
        }
    }

    fn identifier(&mut self) -> Tok<'a> {
        let start = self.pos;
        let mut i = start;
        while self
            .byte(i)
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            i += 1;
        }
        let word = self.slice(start, i);
        // `nan(0x7fa00001)`: a NaN with its bit pattern (this crate's extension).
        if word == "nan" && self.input.get(i..).is_some_and(|r| r.starts_with("(0x")) {
            let mut j = i + 3;
            while self.byte(j).is_some_and(|b| b.is_ascii_hexdigit()) {
                j += 1;
            }
            if j > i + 3 && self.byte(j) == Some(b')') {
                self.pos = j + 1;
                return Tok::Float(self.slice(start, j + 1));
            }
        }
        self.pos = i;
        Tok::Ident(word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: &str) -> Vec<Tok<'_>> {
        let mut lx = Lexer::new(input);
        let mut out = Vec::new();
        loop {
            let t = lx.next_token().expect("lexes");
            if t.tok == Tok::Eof {
                return out;
            }
            out.push(t.tok);
        }
    }

    #[test]
    fn basic_tokens() {
        assert_eq!(
            tokens("g (float[N,3] X) => (Y) # comment\n{ Y = Relu(X) }"),
            vec![
                Tok::Ident("g"),
                Tok::Punct(b'('),
                Tok::Ident("float"),
                Tok::Punct(b'['),
                Tok::Ident("N"),
                Tok::Punct(b','),
                Tok::Int("3"),
                Tok::Punct(b']'),
                Tok::Ident("X"),
                Tok::Punct(b')'),
                Tok::Arrow,
                Tok::Punct(b'('),
                Tok::Ident("Y"),
                Tok::Punct(b')'),
                Tok::Punct(b'{'),
                Tok::Ident("Y"),
                Tok::Punct(b'='),
                Tok::Ident("Relu"),
                Tok::Punct(b'('),
                Tok::Ident("X"),
                Tok::Punct(b')'),
                Tok::Punct(b'}'),
            ]
        );
        assert_eq!(
            tokens("-1.5e-3 2 nan(0x7fa00000) nan (x)"),
            vec![
                Tok::Punct(b'-'),
                Tok::Float("1.5e-3"),
                Tok::Int("2"),
                Tok::Float("nan(0x7fa00000)"),
                Tok::Ident("nan"),
                Tok::Punct(b'('),
                Tok::Ident("x"),
                Tok::Punct(b')'),
            ]
        );
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(
            tokens(r#""a\"b\\c\x41\xff" "é""#),
            vec![
                Tok::Str(b"a\"b\\cA\xff".to_vec()),
                Tok::Str("é".as_bytes().to_vec())
            ]
        );
        let mut lx = Lexer::new("\"abc");
        assert_eq!(
            lx.next_token().map_err(|e| e.kind),
            Err(ParseErrorKind::UnterminatedString)
        );
        let mut lx = Lexer::new("  \"\\xZ1\"");
        let err = lx.next_token().expect_err("bad escape");
        assert_eq!(err.offset, 3);
    }

    #[test]
    fn annotation_blocks_join_lines_and_map_offsets() {
        let input = "x\n  #@ doc: \"a\n  #@ b\"\n  #@\n y";
        let mut lx = Lexer::new(input);
        assert_eq!(lx.next_token().map(|t| t.tok), Ok(Tok::Ident("x")));
        let t = lx.next_token().expect("annotation");
        let Tok::Annotation(block) = t.tok else {
            panic!("expected an annotation, got {:?}", t.tok)
        };
        assert_eq!(block.content, "doc: \"a\nb\"\n");
        assert_eq!(t.start, 4);
        // `b` on the second content line maps back to its place in the input.
        let b_in_content = block.content.find('b').expect("b");
        assert_eq!(
            block.input_offset(b_in_content),
            input.find("b\"").expect("b")
        );
        assert_eq!(lx.next_token().map(|t| t.tok), Ok(Tok::Ident("y")));
    }
}
