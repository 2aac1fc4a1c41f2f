//! Diagnostics: an error with its span and notes, the list of every error of a file, and the
//! rustc-style rendering (`path:line:col: error: message`, the source line, a caret line).
//! Also [`LineIndex`], which turns byte offsets into the 1-based line and column of a
//! [`Span`].

use std::fmt::Write as _;

use crate::ir::Span;

/// One error of a rule file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where the error is.
    pub span: Span,
    /// What is wrong, one line.
    pub message: String,
    /// Extra lines: hints, where a name was first defined, what exists instead.
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            span,
            message: message.into(),
            notes: Vec::new(),
        }
    }

    /// Adds a note line.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// Every error of a rule file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an error.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.items.push(diagnostic);
    }

    /// Whether there is no error.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of errors.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The errors, in the order [`Self::sort`] left them.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> + '_ {
        self.items.iter()
    }

    /// Puts the errors in source order (stable for errors at one place) and drops exact
    /// duplicates.
    pub fn sort(&mut self) {
        self.items
            .sort_by_key(|d| (d.span.start, d.span.end, d.span.line));
        self.items.dedup();
    }

    /// Renders every error rustc-style, in source order:
    ///
    /// ```text
    /// rules/x.rules:5:3: error: unknown op `Relux`
    ///   |
    /// 5 |   Relux(x) => x
    ///   |   ^^^^^
    ///   = note: did you mean `Relu`?
    /// ```
    ///
    /// followed by a count line.
    pub fn render(&self, path: &str, source: &str) -> String {
        let mut sorted = self.clone();
        sorted.sort();
        let width = sorted
            .items
            .iter()
            .map(|d| d.span.line.to_string().len())
            .max()
            .unwrap_or(1);
        let pad = " ".repeat(width);
        let mut out = String::new();
        for d in &sorted.items {
            let _ = writeln!(
                out,
                "{path}:{}:{}: error: {}",
                d.span.line, d.span.col, d.message
            );
            let (line_text, carets) = excerpt(source, d.span);
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{:>width$} | {}", d.span.line, line_text);
            let _ = writeln!(out, "{pad} | {carets}");
            for note in &d.notes {
                let _ = writeln!(out, "{pad} = note: {note}");
            }
            out.push('\n');
        }
        let n = sorted.items.len();
        let _ = writeln!(out, "{path}: {n} error{}", if n == 1 { "" } else { "s" });
        out
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl Extend<Diagnostic> for Diagnostics {
    fn extend<T: IntoIterator<Item = Diagnostic>>(&mut self, iter: T) {
        self.items.extend(iter);
    }
}

/// The source line of a span (without its newline) and the caret line under the span: spaces
/// (tabs kept) up to the span's column, then one `^` per character of the span on that line,
/// at least one.
fn excerpt(source: &str, span: Span) -> (String, String) {
    let line_text = source
        .split('\n')
        .nth(span.line.saturating_sub(1))
        .unwrap_or("")
        .trim_end_matches('\r');
    let lead: String = line_text
        .chars()
        .take(span.col.saturating_sub(1))
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let on_line = line_text
        .chars()
        .count()
        .saturating_sub(span.col.saturating_sub(1))
        .max(1);
    let span_chars = source
        .get(span.start.min(source.len())..span.end.min(source.len()))
        .map_or(0, |s| s.chars().take_while(|&c| c != '\n').count());
    let n = span_chars.clamp(1, on_line);
    (line_text.to_string(), format!("{lead}{}", "^".repeat(n)))
}

/// Byte offset -> 1-based line and column (in characters) of one source text.
#[derive(Debug, Clone)]
pub(crate) struct LineIndex {
    /// Byte offset of the start of each line.
    starts: Vec<usize>,
    len: usize,
}

impl LineIndex {
    pub(crate) fn new(source: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex {
            starts,
            len: source.len(),
        }
    }

    /// The span of `start..end` (clamped to the text).
    pub(crate) fn span(&self, source: &str, start: usize, end: usize) -> Span {
        let start = start.min(self.len);
        let end = end.clamp(start, self.len);
        let line = self.starts.partition_point(|&s| s <= start).max(1);
        let line_start = self.starts.get(line - 1).copied().unwrap_or(0);
        let col = source
            .get(line_start..start)
            .map_or(start - line_start, |s| s.chars().count())
            + 1;
        Span {
            start,
            end,
            line,
            col,
        }
    }

    /// Byte offset of the start of 1-based `line` (the end of the text past the last line).
    pub(crate) fn line_start(&self, line: usize) -> usize {
        self.starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(self.len)
    }

    /// Number of lines.
    pub(crate) fn line_count(&self) -> usize {
        self.starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_span() {
        let src = "# h\n\n# id\nrule a:\n  Relux(x) => x\n";
        let idx = LineIndex::new(src);
        let start = src.find("Relux").unwrap();
        let mut d = Diagnostics::new();
        d.push(
            Diagnostic::new(idx.span(src, start, start + 5), "unknown op `Relux`")
                .with_note("did you mean `Relu`?"),
        );
        let out = d.render("f.rules", src);
        assert_eq!(
            out,
            "f.rules:5:3: error: unknown op `Relux`\n  |\n5 |   Relux(x) => x\n  |   ^^^^^\n  = note: did you mean `Relu`?\n\nf.rules: 1 error\n"
        );
    }

    #[test]
    fn spans_past_the_end_do_not_panic() {
        let src = "ab\ncd";
        let idx = LineIndex::new(src);
        let s = idx.span(src, 100, 200);
        assert_eq!((s.line, s.col), (2, 3));
        let mut d = Diagnostics::new();
        d.push(Diagnostic::new(s, "x"));
        assert!(d.render("p", src).contains("2 | cd"));
    }
}
