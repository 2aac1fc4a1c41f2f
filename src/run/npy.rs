//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0) as tensors: the magic
//! `\x93NUMPY`, a version, a header length (u16 in 1.0, u32 after), a Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`, then the raw elements.
//!
//! Element types that map to ONNX: bool (`|b1`), signed and unsigned integers of 1 to 8
//! bytes, float16/32/64 and complex64/128, in either byte order. Fortran-order data is
//! transposed to row-major. Anything else (objects, strings, structured or datetime
//! dtypes) is refused with an error naming the file and the descr.

use std::path::Path;

use onnx_proto::TensorProto;
use onnx_ref::{DType, Tensor, MAX_ELEMENTS};

use crate::Error;

const MAGIC: &[u8] = b"\x93NUMPY";
/// The largest header accepted; numpy itself writes a few hundred bytes.
const MAX_HEADER_LEN: usize = 1 << 20;
/// Nesting limit of the header literal (a structured descr nests lists and tuples).
const MAX_DEPTH: usize = 32;

/// What is wrong with the bytes of a `.npy` file ([`parse_npy`]); [`read_npy`] adds the file
/// (`Error::Npy`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NpyError {
    /// The bytes do not start with the `\x93NUMPY` magic.
    #[error("not a .npy file (no \\x93NUMPY magic)")]
    NoMagic,
    /// The file ends before the format version.
    #[error("truncated: the file ends inside the version")]
    TruncatedVersion,
    /// A format version other than 1.0, 2.0 and 3.0.
    #[error("unsupported .npy format version {major}.{minor}")]
    UnsupportedVersion {
        /// The major version byte.
        major: u8,
        /// The minor version byte.
        minor: u8,
    },
    /// The file ends inside the header length.
    #[error("truncated: the file ends inside the header length")]
    TruncatedHeaderLength,
    /// The header length is above the limit.
    #[error("header of {len} bytes (more than {max})")]
    HeaderTooLong {
        /// The header length the file gives.
        len: usize,
        /// The largest header accepted.
        max: usize,
    },
    /// The file ends inside the header.
    #[error("truncated: the header needs {needed} bytes, the file has {available}")]
    TruncatedHeader {
        /// The header length the file gives.
        needed: usize,
        /// The bytes after the header length.
        available: usize,
    },
    /// A format 3.0 header that is not UTF-8.
    #[error("header is not UTF-8: {0}")]
    HeaderNotUtf8(std::str::Utf8Error),
    /// The header literal does not parse.
    #[error("header: expected {expected} at character {at}, found {found}")]
    Syntax {
        /// What the parser expected ("a value", "':'", ...).
        expected: String,
        /// The character position in the header.
        at: usize,
        /// The character found, quoted, or "the end of the header".
        found: String,
    },
    /// The header literal nests deeper than the limit.
    #[error("header: nested deeper than {max}")]
    TooDeep {
        /// The nesting limit.
        max: usize,
    },
    /// A bare name other than True, False and None.
    #[error("header: unexpected name '{name}'")]
    UnexpectedName {
        /// The name.
        name: String,
    },
    /// An integer that does not fit in 64 bits.
    #[error("header: integer {digits} is too large")]
    IntegerTooLarge {
        /// The digits as written.
        digits: String,
    },
    /// Text after the header's dict.
    #[error("header: unexpected text after the dict: {header:?}")]
    TrailingText {
        /// The whole header.
        header: String,
    },
    /// The header literal is not a dict.
    #[error("header is not a dict: {header:?}")]
    NotADict {
        /// The whole header.
        header: String,
    },
    /// A structured dtype (a list of fields) as `descr`.
    #[error("structured dtype {descr} is not supported (a tensor needs one element type)")]
    StructuredDtype {
        /// The descr, rendered as Python.
        descr: String,
    },
    /// A shape entry that is not an integer.
    #[error("header: shape holds {entry}, not an integer")]
    ShapeEntry {
        /// The entry, rendered as Python.
        entry: String,
    },
    /// A header key other than descr, fortran_order and shape, or one of them with a value of
    /// the wrong kind.
    #[error("header: unexpected entry '{key}': {value}")]
    UnexpectedEntry {
        /// The key.
        key: String,
        /// Its value, rendered as Python.
        value: String,
    },
    /// The header lacks one of its three keys.
    #[error("header lacks one of 'descr', 'fortran_order', 'shape': {header:?}")]
    MissingKey {
        /// The header, without its trailing padding.
        header: String,
    },
    /// A descr with no ONNX element type.
    #[error(
        "dtype descr '{descr}' is not supported: {why} (supported: bool, int8..64, \
         uint8..64, float16/32/64, complex64/128)"
    )]
    UnsupportedDescr {
        /// The descr.
        descr: String,
        /// Why ("Python objects", "unicode strings", ...).
        why: &'static str,
    },
    /// A shape with more elements than the interpreter allows.
    #[error("shape {shape:?} has more than {max} elements")]
    TooManyElements {
        /// The shape.
        shape: Vec<u64>,
        /// The element limit.
        max: u64,
    },
    /// Fewer data bytes than the shape and descr need.
    #[error("truncated: shape {shape:?} of '{descr}' needs {needed} bytes of data, the file has {available}")]
    TruncatedData {
        /// The shape.
        shape: Vec<u64>,
        /// The descr.
        descr: String,
        /// The bytes the data needs.
        needed: u64,
        /// The bytes after the header.
        available: u64,
    },
    /// More data bytes than the shape and descr need.
    #[error("{extra} bytes after the data of shape {shape:?} of '{descr}' ({needed} bytes)")]
    TrailingData {
        /// The bytes too many.
        extra: u64,
        /// The shape.
        shape: Vec<u64>,
        /// The descr.
        descr: String,
        /// The bytes the data needs.
        needed: u64,
    },
    /// The interpreter refuses the tensor.
    #[error(transparent)]
    Tensor(onnx_ref::RefError),
}

/// A tensor read from a `.npy` file and the file's element descr (e.g. `<f4`).
#[derive(Debug, Clone)]
pub struct NpyTensor {
    /// The array.
    pub tensor: Tensor,
    /// Its NumPy dtype descriptor (`<f4`, ...).
    pub descr: String,
}

/// True when `path` ends in `.npy` (any case).
pub fn is_npy_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
}

/// Reads a `.npy` file; errors name the file.
pub fn read_npy(path: &Path) -> Result<NpyTensor, Error> {
    let bytes = std::fs::read(path).map_err(|source| onnx_proto::Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_npy(&bytes).map_err(|error| Error::Npy {
        path: path.to_path_buf(),
        error: Box::new(error),
    })
}

/// Parses the bytes of a `.npy` file; the error says what is wrong with them.
pub fn parse_npy(bytes: &[u8]) -> Result<NpyTensor, NpyError> {
    let header = split_header(bytes)?;
    let fields = parse_header(&header.text)?;
    let elem = parse_descr(&fields.descr)?;
    let mut count: u64 = 1;
    for &d in &fields.shape {
        count = count
            .checked_mul(d)
            .filter(|&c| c <= MAX_ELEMENTS)
            .ok_or_else(|| NpyError::TooManyElements {
                shape: fields.shape.clone(),
                max: MAX_ELEMENTS,
            })?;
    }
    let want = count * elem.size as u64;
    let data = header.data;
    if (data.len() as u64) < want {
        return Err(NpyError::TruncatedData {
            shape: fields.shape,
            descr: fields.descr,
            needed: want,
            available: data.len() as u64,
        });
    }
    if data.len() as u64 > want {
        return Err(NpyError::TrailingData {
            extra: data.len() as u64 - want,
            shape: fields.shape,
            descr: fields.descr,
            needed: want,
        });
    }
    let mut raw = data.to_vec();
    if elem.big_endian {
        // A complex number is two floats, each swapped on its own.
        let unit = if elem.complex {
            elem.size / 2
        } else {
            elem.size
        };
        if unit > 1 {
            raw.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
        }
    }
    let shape: Vec<usize> = fields.shape.iter().map(|&d| d as usize).collect();
    if fields.fortran_order && shape.len() > 1 {
        raw = fortran_to_row_major(&raw, &shape, elem.size);
    }
    let proto = TensorProto {
        dims: fields.shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(elem.dtype.code()),
        raw_data: Some(bytes::Bytes::from(raw)),
        ..TensorProto::default()
    };
    let tensor = Tensor::from_proto(&proto).map_err(NpyError::Tensor)?;
    Ok(NpyTensor {
        tensor,
        descr: fields.descr,
    })
}

struct Split<'a> {
    text: String,
    data: &'a [u8],
}

/// Checks the magic and version; returns the header text and the bytes after it.
fn split_header(bytes: &[u8]) -> Result<Split<'_>, NpyError> {
    if bytes.len() < MAGIC.len() || !bytes.starts_with(MAGIC) {
        return Err(NpyError::NoMagic);
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(&[major, minor]) => (major, minor),
        _ => return Err(NpyError::TruncatedVersion),
    };
    let (len_size, utf8) = match major {
        1 => (2, false),
        2 => (4, false),
        3 => (4, true),
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let start = 8 + len_size;
    let len_bytes = bytes.get(8..start).ok_or(NpyError::TruncatedHeaderLength)?;
    let header_len = len_bytes
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    if header_len > MAX_HEADER_LEN {
        return Err(NpyError::HeaderTooLong {
            len: header_len,
            max: MAX_HEADER_LEN,
        });
    }
    let end = start + header_len;
    let header = bytes
        .get(start..end)
        .ok_or_else(|| NpyError::TruncatedHeader {
            needed: header_len,
            available: bytes.len() - start,
        })?;
    let text = if utf8 {
        std::str::from_utf8(header)
            .map_err(NpyError::HeaderNotUtf8)?
            .to_string()
    } else {
        // Format 1.0 and 2.0 headers are latin-1.
        header.iter().map(|&b| char::from(b)).collect()
    };
    Ok(Split {
        text,
        data: bytes.get(end..).unwrap_or_default(),
    })
}

/// The three keys of a header.
struct HeaderFields {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

fn parse_header(text: &str) -> Result<HeaderFields, NpyError> {
    let mut p = LiteralParser {
        chars: text.chars().collect(),
        pos: 0,
    };
    let lit = p.value(0)?;
    p.skip_space();
    if p.pos != p.chars.len() {
        return Err(NpyError::TrailingText {
            header: text.to_string(),
        });
    }
    let Literal::Dict(entries) = lit else {
        return Err(NpyError::NotADict {
            header: text.to_string(),
        });
    };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    for (key, value) in entries {
        match (key.as_str(), value) {
            ("descr", Literal::Str(s)) => descr = Some(s),
            ("descr", other) => {
                return Err(NpyError::StructuredDtype {
                    descr: other.render(),
                })
            }
            ("fortran_order", Literal::Bool(b)) => fortran_order = Some(b),
            ("shape", Literal::Tuple(items)) => {
                let dims = items
                    .into_iter()
                    .map(|d| match d {
                        Literal::Int(v) => Ok(v),
                        other => Err(NpyError::ShapeEntry {
                            entry: other.render(),
                        }),
                    })
                    .collect::<Result<Vec<u64>, NpyError>>()?;
                shape = Some(dims);
            }
            (key, value) => {
                return Err(NpyError::UnexpectedEntry {
                    key: key.to_string(),
                    value: value.render(),
                })
            }
        }
    }
    match (descr, fortran_order, shape) {
        (Some(descr), Some(fortran_order), Some(shape)) => Ok(HeaderFields {
            descr,
            fortran_order,
            shape,
        }),
        _ => Err(NpyError::MissingKey {
            header: text.trim_end().to_string(),
        }),
    }
}

/// The element type a descr names.
struct ElemType {
    dtype: DType,
    size: usize,
    big_endian: bool,
    complex: bool,
}

fn parse_descr(descr: &str) -> Result<ElemType, NpyError> {
    let unsupported = |why: &'static str| {
        Err(NpyError::UnsupportedDescr {
            descr: descr.to_string(),
            why,
        })
    };
    let (order, rest) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let mut chars = rest.chars();
    let kind = chars.next().unwrap_or(' ');
    let Ok(size) = chars.as_str().parse::<usize>() else {
        return match kind {
            'O' => unsupported("Python objects"),
            '?' if chars.as_str().is_empty() => parse_descr("|b1"),
            _ => unsupported("not a fixed-size number type"),
        };
    };
    let dtype = match (kind, size) {
        ('b' | '?', 1) => DType::Bool,
        ('i', 1) => DType::Int8,
        ('i', 2) => DType::Int16,
        ('i', 4) => DType::Int32,
        ('i', 8) => DType::Int64,
        ('u', 1) => DType::Uint8,
        ('u', 2) => DType::Uint16,
        ('u', 4) => DType::Uint32,
        ('u', 8) => DType::Uint64,
        ('f', 2) => DType::Float16,
        ('f', 4) => DType::Float,
        ('f', 8) => DType::Double,
        ('c', 8) => DType::Complex64,
        ('c', 16) => DType::Complex128,
        ('O', _) => return unsupported("Python objects"),
        ('U', _) => return unsupported("unicode strings"),
        ('S' | 'a', _) => return unsupported("byte strings"),
        ('V', _) => return unsupported("raw or structured data"),
        ('M' | 'm', _) => return unsupported("dates and times"),
        _ => return unsupported("no ONNX element type of that kind and size"),
    };
    if order == '|' && size > 1 {
        return unsupported("'|' (no byte order) on a multi-byte type");
    }
    let big_endian = match order {
        '>' => true,
        '=' => cfg!(target_endian = "big"),
        _ => false,
    };
    Ok(ElemType {
        dtype,
        size,
        big_endian,
        complex: kind == 'c',
    })
}

/// Reorders column-major elements of `elem` bytes each into row-major order.
fn fortran_to_row_major(data: &[u8], shape: &[usize], elem: usize) -> Vec<u8> {
    let count = data.len() / elem.max(1);
    let rank = shape.len();
    // Element strides of the column-major layout.
    let mut strides = vec![1usize; rank];
    for axis in 1..rank {
        strides[axis] = strides[axis - 1] * shape[axis - 1];
    }
    let mut out = Vec::with_capacity(data.len());
    let mut index = vec![0usize; rank];
    let mut offset = 0usize;
    for _ in 0..count {
        let at = offset * elem;
        out.extend_from_slice(data.get(at..at + elem).unwrap_or_default());
        // Advance the row-major index (last axis fastest), tracking the column-major offset.
        for axis in (0..rank).rev() {
            index[axis] += 1;
            offset += strides[axis];
            if index[axis] < shape[axis] {
                break;
            }
            offset -= strides[axis] * shape[axis];
            index[axis] = 0;
        }
    }
    out
}

/// A Python literal as a `.npy` header uses them.
enum Literal {
    Str(String),
    Bool(bool),
    Int(u64),
    None,
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(String, Literal)>),
}

impl Literal {
    fn render(&self) -> String {
        let join = |items: &[Literal]| {
            items
                .iter()
                .map(Literal::render)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Literal::Str(s) => format!("'{s}'"),
            Literal::Bool(b) => if *b { "True" } else { "False" }.to_string(),
            Literal::Int(v) => v.to_string(),
            Literal::None => "None".to_string(),
            Literal::Tuple(items) => format!("({})", join(items)),
            Literal::List(items) => format!("[{}]", join(items)),
            Literal::Dict(entries) => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("'{k}': {}", v.render()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// A recursive-descent parser of the literal subset `.npy` headers use.
struct LiteralParser {
    chars: Vec<char>,
    pos: usize,
}

impl LiteralParser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn error(&self, expected: &str) -> NpyError {
        let found = self
            .peek()
            .map_or("the end of the header".to_string(), |c| format!("{c:?}"));
        NpyError::Syntax {
            expected: expected.to_string(),
            at: self.pos,
            found,
        }
    }

    fn value(&mut self, depth: usize) -> Result<Literal, NpyError> {
        if depth > MAX_DEPTH {
            return Err(NpyError::TooDeep { max: MAX_DEPTH });
        }
        self.skip_space();
        match self.peek() {
            Some(q @ ('\'' | '"')) => self.string(q).map(Literal::Str),
            Some('(') => self.items(')', depth).map(Literal::Tuple),
            Some('[') => self.items(']', depth).map(Literal::List),
            Some('{') => self.dict(depth),
            Some(c) if c.is_ascii_digit() => self.int(),
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                    self.pos += 1;
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                match word.as_str() {
                    "True" => Ok(Literal::Bool(true)),
                    "False" => Ok(Literal::Bool(false)),
                    "None" => Ok(Literal::None),
                    _ => Err(NpyError::UnexpectedName { name: word }),
                }
            }
            _ => Err(self.error("a value")),
        }
    }

    fn string(&mut self, quote: char) -> Result<String, NpyError> {
        self.pos += 1;
        let mut s = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("the end of a string")),
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(s);
                }
                Some('\\') => {
                    self.pos += 1;
                    let c = self.peek().ok_or_else(|| self.error("an escape"))?;
                    s.push(c);
                    self.pos += 1;
                }
                Some(c) => {
                    s.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn int(&mut self) -> Result<Literal, NpyError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        // Python 2 wrote long integers as `3L`.
        if self.peek() == Some('L') {
            self.pos += 1;
        }
        digits
            .parse()
            .map(Literal::Int)
            .map_err(|_| NpyError::IntegerTooLarge { digits })
    }

    /// A comma-separated sequence up to `close` (a trailing comma is allowed).
    fn items(&mut self, close: char, depth: usize) -> Result<Vec<Literal>, NpyError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_space();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
            self.skip_space();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(c) if c == close => {}
                _ => return Err(self.error(&format!("',' or '{close}'"))),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Literal, NpyError> {
        self.pos += 1;
        let mut entries = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some('}') => {
                    self.pos += 1;
                    return Ok(Literal::Dict(entries));
                }
                Some(q @ ('\'' | '"')) => {
                    let key = self.string(q)?;
                    self.skip_space();
                    if self.peek() != Some(':') {
                        return Err(self.error("':'"));
                    }
                    self.pos += 1;
                    let value = self.value(depth + 1)?;
                    entries.push((key, value));
                    self.skip_space();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some('}') => {}
                        _ => return Err(self.error("',' or '}'")),
                    }
                }
                _ => return Err(self.error("a string key or '}'")),
            }
        }
    }
}
