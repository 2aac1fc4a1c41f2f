//! The parser: pest (grammar.pest) to the syntax tree of [`crate::ast`].
//!
//! A file is cut into chunks at every line that starts with `rule`, and each chunk is parsed
//! on its own, so a syntax error costs one rule, not the rest of the file: every rule with a
//! syntax error gets its own message. Nesting is bounded before pest runs (brackets) and while
//! building (expression height), so no input can exhaust the stack.

mod build;

use pest::error::{ErrorVariant, InputLocation};
use pest::Parser as _;

use crate::ast::{File, RuleDef, Tag};
use crate::diag::{Diagnostic, LineIndex};

use build::Builder;

#[derive(pest_derive::Parser)]
#[grammar = "grammar.pest"]
struct RuleParser;

/// Deepest bracket nesting (`(`, `[`) a file may have.
const MAX_NESTING: usize = 64;

/// Parses a whole file; the rules that parse, and one error per chunk that does not.
pub(crate) fn parse_file(source: &str, index: &LineIndex) -> (File, Vec<Diagnostic>) {
    pest::set_error_detail(true);
    let mut file = File::default();
    let mut diags = Vec::new();
    for (start, end) in chunks(source, index) {
        let Some(text) = source.get(start..end) else {
            continue;
        };
        let mut b = Builder::new(source, index, start);
        if let Some(at) = too_deep(text) {
            let span = b.span_at(at, at + 1);
            diags.push(Diagnostic::new(
                span,
                format!("syntax error: brackets nested deeper than {MAX_NESTING} levels"),
            ));
            continue;
        }
        match RuleParser::parse(Rule::file, text) {
            Ok(pairs) => {
                for pair in pairs.flatten().filter(|p| p.as_rule() == Rule::rule_def) {
                    let span = b.span(&pair);
                    match b.rule_def(pair) {
                        Some(rule) => file.rules.push(rule),
                        None => b.diags.push(Diagnostic::new(
                            span,
                            "internal error: the parse tree has an unexpected shape",
                        )),
                    }
                }
            }
            Err(err) => {
                let d = syntax_error(&b, &err, text);
                b.diags.push(d);
            }
        }
        diags.append(&mut b.diags);
    }
    (file, diags)
}

/// Parses the text of a rule registered from Rust: its left side and clauses (`extern_rule`).
pub(crate) fn parse_extern(
    source: &str,
    index: &LineIndex,
    name: &str,
) -> (Option<RuleDef>, Vec<Diagnostic>) {
    pest::set_error_detail(true);
    let mut b = Builder::new(source, index, 0);
    if let Some(at) = too_deep(source) {
        let span = b.span_at(at, at + 1);
        let d = Diagnostic::new(
            span,
            format!("syntax error: brackets nested deeper than {MAX_NESTING} levels"),
        );
        return (None, vec![d]);
    }
    let def = match RuleParser::parse(Rule::extern_rule, source) {
        Ok(mut pairs) => {
            let def = pairs.next().and_then(|p| b.extern_def(p, name));
            if def.is_none() && b.diags.is_empty() {
                let span = b.span_at(0, source.len());
                b.diags.push(Diagnostic::new(
                    span,
                    "internal error: the parse tree has an unexpected shape",
                ));
            }
            def
        }
        Err(err) => {
            let d = syntax_error(&b, &err, source);
            b.diags.push(d);
            None
        }
    };
    (def, b.diags)
}

/// Parses a list of tags given from Rust (`exact, opset 13..`).
pub(crate) fn parse_tags(source: &str, index: &LineIndex) -> (Vec<Tag>, Vec<Diagnostic>) {
    pest::set_error_detail(true);
    let mut b = Builder::new(source, index, 0);
    let tags = match RuleParser::parse(Rule::tag_list, source) {
        Ok(mut pairs) => pairs.next().and_then(|p| b.tag_list(p)).unwrap_or_default(),
        Err(err) => {
            let d = syntax_error(&b, &err, source);
            b.diags.push(d);
            Vec::new()
        }
    };
    (tags, b.diags)
}

/// Whether a source line starts a rule (`rule` at its start, after indentation).
pub(crate) fn starts_rule(line: &str) -> bool {
    let trimmed = line.trim_start_matches([' ', '\t']);
    trimmed.strip_prefix("rule").is_some_and(|after| {
        after
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
    })
}

/// Byte ranges of the chunks: the text before the first `rule` line, then one per `rule` line.
fn chunks(source: &str, index: &LineIndex) -> Vec<(usize, usize)> {
    let mut starts = vec![0];
    for line in 1..=index.line_count() {
        let at = index.line_start(line);
        let rest = source.get(at..).unwrap_or("");
        let text = rest.split('\n').next().unwrap_or("");
        if at > 0 && starts_rule(text) {
            let indent = text.len() - text.trim_start_matches([' ', '\t']).len();
            starts.push(at + indent);
        }
    }
    let mut ends: Vec<usize> = starts.iter().skip(1).copied().collect();
    ends.push(source.len());
    starts.into_iter().zip(ends).collect()
}

/// The offset where bracket nesting first exceeds [`MAX_NESTING`], skipping comments and
/// strings (a `#` right after a name is an output count, not a comment).
fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut chars = text.char_indices().peekable();
    let mut prev = ' ';
    while let Some((i, c)) = chars.next() {
        match c {
            '#' if !(prev.is_ascii_alphanumeric() || prev == '_') => {
                while chars.next_if(|&(_, c)| c != '\n').is_some() {}
            }
            '"' => {
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' | '\n' => break,
                        _ => {}
                    }
                }
            }
            '(' | '[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    None
}

/// What messages call a grammar rule.
fn rule_label(rule: Rule) -> &'static str {
    use Rule::*;
    match rule {
        EOI => "end of file",
        file | rule_def | kw_rule => "`rule`",
        extern_rule => "a rule",
        rhs_extern => "`extern`",
        tag_list => "tags",
        rule_name => "a rule name",
        tags => "tags `[...]`",
        tag | tag_tol | tag_opset | tag_word => "a tag",
        opset_lo | opset_hi => "an opset",
        lhs | pattern | pat_op => "a pattern",
        rhs | term | term_op => "a term",
        kw_let | let_def => "`let`",
        kw_where | where_def => "`where`",
        kw_hint | hint_def => "`hint`",
        var_name | keyword => "a variable",
        wildcard => "`_`",
        absent => "`None`",
        op_name | op_head | op_path | op_var => "an op",
        attr_name => "an attribute name",
        domain => "a domain",
        class => "an op class",
        op_since | since_lo | since_dots | since_hi => "a version range",
        op_outputs | out_count => "an output count",
        proj | proj_index => "an output index `.i`",
        attr_rest => "`..rest`",
        number | special | signed | boolean | string | str_body | literal | lit_list => "a literal",
        pat_attrs | term_attrs => "attributes `<...>`",
        pat_attr | term_attr => "an attribute",
        pat_inputs | pat_input | term_inputs | term_input => "an input",
        in_variadic => "`xs..`",
        in_optional => "`x?`",
        expr | and_expr | not_expr | cmp_expr | sum | product | unary | postfix | atom | call
        | list | paren => "an expression",
        index => "an index `[i]`",
        op_or => "`||`",
        op_and => "`&&`",
        op_not => "`!`",
        op_cmp => "a comparison",
        op_sum => "`+` or `-`",
        op_prod => "`*`, `/` or `%`",
        op_neg => "`-`",
        WHITESPACE | COMMENT | ident_char => "a space",
    }
}

/// A syntax error of one chunk as a diagnostic: the tokens and rules pest expected at the
/// furthest position it reached, and what it found there.
fn syntax_error(b: &Builder<'_>, err: &pest::error::Error<Rule>, text: &str) -> Diagnostic {
    let mut pos = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let mut labels: Vec<String> = Vec::new();
    let mut tokens: Vec<String> = Vec::new();
    let attempts = err.parse_attempts();
    let furthest = attempts.as_ref().map_or(pos, |a| a.max_position.max(pos));
    // The rules pest names were tried at `pos`; the tokens at the furthest position
    // reached. When the two differ, the tokens say more.
    if furthest == pos {
        if let ErrorVariant::ParsingError { positives, .. } = &err.variant {
            labels.extend(positives.iter().map(|r| rule_label(*r).to_string()));
        }
    }
    pos = furthest;
    if let Some(attempts) = attempts {
        // `ParsingToken` is not exported: tell literal tokens from character ranges
        // (`a..z`), built-ins and the exponent's `E` by their display.
        for token in attempts.expected_tokens() {
            let token = token.to_string();
            let chars: Vec<char> = token.chars().collect();
            let range = chars.len() == 4 && chars[1] == '.' && chars[2] == '.';
            let word = chars.iter().all(|c| c.is_ascii_alphanumeric() || *c == '_');
            if range
                || word
                || token.trim().is_empty()
                || matches!(token.as_str(), "#" | "\"" | ".")
            {
                continue;
            }
            tokens.push(token);
        }
    }
    // The tokens that start a pattern, a term or an expression are implied by it.
    let starts_value = labels.iter().any(|e| {
        matches!(
            e.as_str(),
            "an expression" | "a pattern" | "a term" | "a literal"
        )
    });
    if starts_value {
        tokens.retain(|t| !matches!(t.as_str(), "(" | "[" | "-" | "!" | "$"));
    }
    let mut expected: Vec<String> = tokens.iter().map(|t| format!("`{t}`")).collect();
    expected.extend(labels);
    expected.sort();
    expected.dedup();
    let rest = text.get(pos..).unwrap_or("");
    let at_end = rest.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#')
    });
    if at_end {
        // Point just after the last line that is not blank or a comment.
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let t = line.trim();
            if !t.is_empty() && !t.starts_with('#') {
                pos = offset + line.trim_end().len();
            }
            offset += line.len();
        }
    }
    let found = if at_end {
        "the end of the rule".to_string()
    } else {
        format!("`{}`", first_token(rest))
    };
    let message = match expected.split_last() {
        None => format!("syntax error: unexpected {found}"),
        Some((only, [])) => format!("syntax error: expected {only}, found {found}"),
        Some((last, rest)) => format!(
            "syntax error: expected {} or {last}, found {found}",
            rest.join(", ")
        ),
    };
    let width = if at_end { 1 } else { first_token(rest).len() };
    Diagnostic::new(b.span_at(pos, pos + width), message)
}

/// The token at the start of `text`: a word or number, a run of operator characters, or one
/// character.
fn first_token(text: &str) -> &str {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let op = |c: char| "=<>!&|:+-*/%.".contains(c);
    let Some(first) = text.chars().next() else {
        return "";
    };
    let n = if word(first) {
        text.find(|c: char| !word(c)).unwrap_or(text.len())
    } else if op(first) {
        text.find(|c: char| !op(c)).unwrap_or(text.len())
    } else {
        first.len_utf8()
    };
    let n = text.char_indices().nth(24).map_or(n, |(i, _)| n.min(i));
    text.get(..n).unwrap_or("")
}
