//! The CUE scanner (`doc/ref/spec.md`, "Lexical elements"; upstream `cue/scanner`): turns source
//! text into [`Token`]s.
//!
//! Rules it implements:
//! - White space is space, tab, carriage return and newline. `//` starts a comment to the end of
//!   the line; a comment acts like a newline.
//! - A comma is inserted at a newline (or a comment, or the end of input) when the line's last
//!   token is an identifier, keyword, bottom, number, string (including the end of an
//!   interpolation), attribute, `)`, `]`, `}`, `?` or `...` ([`TokenKind::inserts_comma`]) —
//!   except when the next token after the newline and any further white space (newlines
//!   included, comments not) is `,` or `:`: JSON may put a key's `:` or a `,` on the next line
//!   (upstream's scanner does not elide there either).
//! - A number may not start with `.` right after a token that ends a value (`a.5` is `a`, `.`,
//!   `5`), so selectors are never taken for floats.
//! - Identifiers are letters (incl. `_` and `$`) and digits, optionally prefixed by `#` or `_#`.
//! - Strings: `"..."`, `'...'`, `"""`/`'''` multi-line (the opening quote must end its line), each
//!   optionally wrapped in `#` marks, which change the escape delimiter to `\#...`. `\(`
//!   (or `\#(`...) opens an interpolation; the scanner keeps a stack of open interpolations and
//!   resumes the string at the `)` closing one, so interpolations nest.
//! - Attributes `@name(...)` are one token; the body's parentheses, brackets and braces must be
//!   balanced, and quoted strings in it are skipped.
//!
//! The scanner never fails: bad input yields [`TokenKind::Illegal`] or a best-effort token and an
//! error in [`Scanner::take_errors`].

use crate::ast::ParseError;
use crate::source::{FileId, Span};
use crate::token::{Token, TokenKind};

/// The state of one open interpolation.
#[derive(Clone, Copy, Debug)]
struct Interp {
    /// Number of `#` marks around the literal.
    hashes: usize,
    /// `"` or `'`.
    quote: u8,
    /// `true` for `"""` / `'''` literals.
    multiline: bool,
    /// Parentheses opened inside the interpolation and not yet closed.
    depth: u32,
}

/// How a string segment ended.
enum SegEnd {
    /// At the closing quote.
    Closed,
    /// At an interpolation `\(`.
    Interp,
}

/// A pull scanner over one source file.
pub struct Scanner<'a> {
    src: &'a str,
    file: FileId,
    pos: usize,
    /// A newline now would insert a comma.
    insert_comma: bool,
    /// The previous token ends a value or is `.`: a `.` now is not the start of a number.
    after_value: bool,
    interps: Vec<Interp>,
    errors: Vec<ParseError>,
}

fn is_letter(c: char) -> bool {
    c == '_' || c == '$' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    is_letter(c) || c.is_ascii_digit() || c.is_numeric()
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `src`.
    pub fn new(file: FileId, src: &'a str) -> Self {
        // Offsets are `u32`: longer inputs are cut (an error is reported for them).
        let mut errors = Vec::new();
        let mut src = src;
        if src.len() > u32::MAX as usize - 1 {
            let mut cut = u32::MAX as usize - 1;
            while !src.is_char_boundary(cut) {
                cut -= 1;
            }
            src = &src[..cut];
            errors.push(ParseError {
                span: Span::new(file, 0, 0),
                message: "source file too large".into(),
            });
        }
        Scanner {
            src,
            file,
            pos: 0,
            insert_comma: false,
            after_value: false,
            interps: Vec::new(),
            errors,
        }
    }

    /// The source text being scanned.
    pub fn source(&self) -> &'a str {
        self.src
    }

    /// Removes and returns the errors reported so far.
    pub fn take_errors(&mut self) -> Vec<ParseError> {
        std::mem::take(&mut self.errors)
    }

    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start as u32, end as u32)
    }

    fn error(&mut self, start: usize, end: usize, message: impl Into<String>) {
        self.errors.push(ParseError {
            span: self.span(start, end),
            message: message.into(),
        });
    }

    fn peek_byte(&self, off: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + off).copied()
    }

    fn peek_char(&self) -> Option<char> {
        self.src.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn char_at(&self, at: usize) -> Option<char> {
        self.src.get(at..).and_then(|s| s.chars().next())
    }

    fn starts_with(&self, s: &str) -> bool {
        self.src.get(self.pos..).is_some_and(|r| r.starts_with(s))
    }

    /// Scans the next token. After the end of input it keeps returning [`TokenKind::Eof`].
    pub fn next_token(&mut self) -> Token {
        let tok = self.scan();
        if tok.kind != TokenKind::Comma || !tok.inserted {
            self.insert_comma = tok.kind.inserts_comma();
            self.after_value = tok.kind.inserts_comma() || tok.kind == TokenKind::Period;
        } else {
            self.insert_comma = false;
            self.after_value = false;
        }
        tok
    }

    fn token(&self, kind: TokenKind, start: usize) -> Token {
        Token {
            kind,
            span: self.span(start, self.pos),
            inserted: false,
        }
    }

    fn inserted_comma(&self, at: usize) -> Token {
        Token {
            kind: TokenKind::Comma,
            span: self.span(at, at),
            inserted: true,
        }
    }

    fn scan(&mut self) -> Token {
        // White space and comments.
        loop {
            match self.peek_byte(0) {
                Some(b' ' | b'\t' | b'\r') => self.pos += 1,
                Some(b'\n') => {
                    if self.insert_comma {
                        let at = self.pos;
                        self.pos += 1;
                        // The newline ends the line unless the next token, past any white
                        // space, is `,` or `:` (JSON laid out over lines).
                        let mut next = self.pos;
                        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.src.as_bytes().get(next)
                        {
                            next += 1;
                        }
                        if let Some(b',' | b':') = self.src.as_bytes().get(next) {
                            self.pos = next;
                            self.insert_comma = false;
                            continue;
                        }
                        return self.inserted_comma(at);
                    }
                    self.pos += 1;
                }
                Some(b'/') if self.peek_byte(1) == Some(b'/') => {
                    if self.insert_comma {
                        return self.inserted_comma(self.pos);
                    }
                    while let Some(b) = self.peek_byte(0) {
                        if b == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        let start = self.pos;
        let Some(c) = self.peek_char() else {
            if self.insert_comma {
                return self.inserted_comma(start);
            }
            return self.token(TokenKind::Eof, start);
        };
        use TokenKind::*;
        if c == '_' && self.starts_with("_|_") {
            self.pos += 3;
            return self.token(Bottom, start);
        }
        if is_letter(c) {
            self.scan_ident_rest();
            return self.token(Ident, start);
        }
        if c.is_ascii_digit() {
            return self.scan_number(start);
        }
        let one = |s: &mut Self, k: TokenKind, n: usize| {
            s.pos += n;
            s.token(k, start)
        };
        let next = self.peek_byte(1);
        match c {
            '#' => {
                let mut n = 0;
                while self.peek_byte(n) == Some(b'#') {
                    n += 1;
                }
                match self.peek_byte(n) {
                    Some(q @ (b'"' | b'\'')) => {
                        self.pos += n;
                        self.scan_string(start, n, q)
                    }
                    _ if n == 1 && self.char_at(self.pos + 1).is_some_and(is_letter) => {
                        self.pos += 1;
                        self.scan_ident_rest();
                        self.token(Ident, start)
                    }
                    _ if n == 1 => {
                        // A lone `#` is an identifier (the definition named `#`).
                        self.pos += 1;
                        self.token(Ident, start)
                    }
                    _ => {
                        self.pos += n;
                        self.error(start, self.pos, "illegal character U+0023 '#'");
                        self.token(Illegal, start)
                    }
                }
            }
            '"' | '\'' => self.scan_string(start, 0, c as u8),
            '.' => {
                if self.starts_with("...") {
                    one(self, Ellipsis, 3)
                } else if !self.after_value && next.is_some_and(|b| b.is_ascii_digit()) {
                    self.scan_number(start)
                } else {
                    one(self, Period, 1)
                }
            }
            '@' => self.scan_attribute(start),
            '+' => one(self, Add, 1),
            '-' => one(self, Sub, 1),
            '*' => one(self, Mul, 1),
            '/' => one(self, Quo, 1),
            '&' if next == Some(b'&') => one(self, Land, 2),
            '&' => one(self, And, 1),
            '|' if next == Some(b'|') => one(self, Lor, 2),
            '|' => one(self, Or, 1),
            '!' if next == Some(b'=') => one(self, Neq, 2),
            '!' if next == Some(b'~') => one(self, Nmat, 2),
            '!' => one(self, Not, 1),
            '=' if next == Some(b'=') => one(self, Eql, 2),
            '=' if next == Some(b'~') => one(self, Mat, 2),
            '=' => one(self, Assign, 1),
            '<' if next == Some(b'=') => one(self, Leq, 2),
            '<' => one(self, Lss, 1),
            '>' if next == Some(b'=') => one(self, Geq, 2),
            '>' => one(self, Gtr, 1),
            ':' => one(self, Colon, 1),
            '?' => one(self, Option, 1),
            ',' => one(self, Comma, 1),
            '(' => {
                if let Some(top) = self.interps.last_mut() {
                    top.depth += 1;
                }
                one(self, LParen, 1)
            }
            ')' => {
                if let Some(top) = self.interps.last_mut() {
                    if top.depth == 0 {
                        let ctx = *top;
                        self.pos += 1;
                        return match self.scan_segment(start, ctx) {
                            SegEnd::Closed => {
                                self.interps.pop();
                                self.token(InterpEnd, start)
                            }
                            SegEnd::Interp => self.token(InterpMid, start),
                        };
                    }
                    top.depth -= 1;
                }
                one(self, RParen, 1)
            }
            '[' => one(self, LBrack, 1),
            ']' => one(self, RBrack, 1),
            '{' => one(self, LBrace, 1),
            '}' => one(self, RBrace, 1),
            _ => {
                self.pos += c.len_utf8();
                self.error(
                    start,
                    self.pos,
                    format!("illegal character U+{:04X} '{}'", c as u32, c),
                );
                self.token(Illegal, start)
            }
        }
    }

    fn scan_ident_rest(&mut self) {
        // A leading `#` is consumed by the caller; `_#x` is handled here.
        if let Some(c) = self.peek_char() {
            self.pos += c.len_utf8();
            if c == '_' && self.peek_byte(0) == Some(b'#') {
                self.pos += 1;
            }
        }
        while let Some(c) = self.peek_char() {
            if !is_ident_char(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
    }

    fn skip_digits(&mut self, ok: impl Fn(u8) -> bool) -> usize {
        let mut n = 0;
        while let Some(b) = self.peek_byte(0) {
            if ok(b) {
                n += 1;
            } else if b != b'_' {
                break;
            }
            self.pos += 1;
        }
        n
    }

    fn scan_number(&mut self, start: usize) -> Token {
        let b0 = self.peek_byte(0);
        let b1 = self.peek_byte(1).map(|b| b.to_ascii_lowercase());
        if b0 == Some(b'0') && matches!(b1, Some(b'x' | b'o' | b'b')) {
            self.pos += 2;
            let (name, n) = match b1 {
                Some(b'x') => ("hexadecimal", self.skip_digits(|b| b.is_ascii_hexdigit())),
                Some(b'o') => ("octal", self.skip_digits(|b| (b'0'..=b'7').contains(&b))),
                _ => ("binary", self.skip_digits(|b| b == b'0' || b == b'1')),
            };
            if n == 0 {
                self.error(start, self.pos, format!("illegal {name} number"));
            }
            if self.peek_byte(0).is_some_and(|b| b.is_ascii_digit()) {
                self.skip_digits(|b| b.is_ascii_digit());
                self.error(start, self.pos, format!("illegal {name} number"));
            }
            return self.token(TokenKind::Int, start);
        }
        let mut float = false;
        if b0 != Some(b'.') {
            self.skip_digits(|b| b.is_ascii_digit());
        }
        if self.peek_byte(0) == Some(b'.') && self.peek_byte(1) != Some(b'.') {
            self.pos += 1;
            float = true;
            self.skip_digits(|b| b.is_ascii_digit());
        }
        if let Some(b'K' | b'M' | b'G' | b'T' | b'P') = self.peek_byte(0) {
            self.pos += 1;
            if self.peek_byte(0) == Some(b'i') {
                self.pos += 1;
            }
            return self.token(TokenKind::Int, start);
        }
        if let Some(b'e' | b'E') = self.peek_byte(0) {
            self.pos += 1;
            float = true;
            if let Some(b'+' | b'-') = self.peek_byte(0) {
                self.pos += 1;
            }
            if self.skip_digits(|b| b.is_ascii_digit()) == 0 {
                self.error(start, self.pos, "exponent has no digits");
            }
        }
        self.token(
            if float {
                TokenKind::Float
            } else {
                TokenKind::Int
            },
            start,
        )
    }

    /// Scans a string literal whose `#` marks (if any) are already consumed; `self.pos` is at the
    /// opening quote.
    fn scan_string(&mut self, start: usize, hashes: usize, quote: u8) -> Token {
        let multiline = self.peek_byte(1) == Some(quote) && self.peek_byte(2) == Some(quote);
        if multiline {
            self.pos += 3;
            // The opening quote must be followed by a newline.
            let mut p = self.pos;
            while let Some(b' ' | b'\t' | b'\r') = self.src.as_bytes().get(p) {
                p += 1;
            }
            if self.src.as_bytes().get(p) == Some(&b'\n') {
                self.pos = p + 1;
            } else {
                self.error(
                    start,
                    self.pos,
                    "expected newline after multiline quote \"\"\"",
                );
            }
        } else {
            self.pos += 1;
        }
        let ctx = Interp {
            hashes,
            quote,
            multiline,
            depth: 0,
        };
        match self.scan_segment(start, ctx) {
            SegEnd::Closed => self.token(TokenKind::String, start),
            SegEnd::Interp => {
                self.interps.push(ctx);
                self.token(TokenKind::InterpStart, start)
            }
        }
    }

    /// Scans string content up to and including the closing quote or an interpolation's `\(`.
    fn scan_segment(&mut self, start: usize, ctx: Interp) -> SegEnd {
        let bytes = self.src.as_bytes();
        let q = ctx.quote;
        loop {
            let Some(&b) = bytes.get(self.pos) else {
                self.error(start, self.pos, "string literal not terminated");
                return SegEnd::Closed;
            };
            if b == q {
                let nq = if ctx.multiline { 3 } else { 1 };
                let quotes = (0..nq).all(|i| bytes.get(self.pos + i) == Some(&q));
                let marks = (0..ctx.hashes).all(|i| bytes.get(self.pos + nq + i) == Some(&b'#'));
                if quotes && marks {
                    self.pos += nq + ctx.hashes;
                    return SegEnd::Closed;
                }
                self.pos += 1;
                continue;
            }
            if b == b'\n' && !ctx.multiline {
                self.error(start, self.pos, "string literal not terminated");
                return SegEnd::Closed;
            }
            if b == b'\\' {
                let marks = (0..ctx.hashes).all(|i| bytes.get(self.pos + 1 + i) == Some(&b'#'));
                if marks {
                    let after = self.pos + 1 + ctx.hashes;
                    match bytes.get(after) {
                        Some(b'(') => {
                            self.pos = after + 1;
                            return SegEnd::Interp;
                        }
                        Some(b'\n') if !ctx.multiline => {
                            self.pos = after;
                            continue;
                        }
                        Some(_) => {
                            // Skip the escaped character (validated when decoding).
                            let len = self.char_at(after).map_or(1, char::len_utf8);
                            self.pos = after + len;
                            continue;
                        }
                        None => {
                            self.pos = after;
                            continue;
                        }
                    }
                }
            }
            self.pos += self.char_at(self.pos).map_or(1, char::len_utf8);
        }
    }

    fn scan_attribute(&mut self, start: usize) -> Token {
        self.pos += 1;
        let name_start = self.pos;
        while let Some(c) = self.peek_char() {
            if !(is_ident_char(c) || c == '#' || c == '-' || c == '.') {
                break;
            }
            self.pos += c.len_utf8();
        }
        if self.pos == name_start {
            self.error(
                start,
                self.pos,
                "invalid attribute: expected name after '@'",
            );
            return self.token(TokenKind::Attribute, start);
        }
        if self.peek_byte(0) != Some(b'(') {
            self.error(start, self.pos, "invalid attribute: expected '('");
            return self.token(TokenKind::Attribute, start);
        }
        let bytes = self.src.as_bytes();
        let mut stack: Vec<u8> = Vec::new();
        loop {
            let Some(&b) = bytes.get(self.pos) else {
                self.error(start, self.pos, "attribute missing ')'");
                return self.token(TokenKind::Attribute, start);
            };
            match b {
                b'(' => stack.push(b')'),
                b'[' => stack.push(b']'),
                b'{' => stack.push(b'}'),
                b')' | b']' | b'}' => {
                    if stack.pop() != Some(b) {
                        self.pos += 1;
                        self.error(start, self.pos, "unbalanced parentheses in attribute");
                        return self.token(TokenKind::Attribute, start);
                    }
                    if stack.is_empty() {
                        self.pos += 1;
                        return self.token(TokenKind::Attribute, start);
                    }
                }
                b'"' | b'\'' | b'#' => {
                    let Some(end) = quoted_end(bytes, self.pos) else {
                        if b == b'#' {
                            self.pos += 1;
                            continue;
                        }
                        self.error(start, self.pos, "string literal not terminated");
                        // Resume after the line, as a one-line string would end there.
                        while let Some(&c) = bytes.get(self.pos) {
                            if c == b'\n' {
                                break;
                            }
                            self.pos += 1;
                        }
                        continue;
                    };
                    self.pos = end;
                    continue;
                }
                b'\n' => {}
                _ => {}
            }
            self.pos += 1;
        }
    }
}

/// The end (one past the closing quote and `#` marks) of the string literal starting at `at` in
/// an attribute body: `"..."`, `'...'`, `"""..."""`, `'''...'''`, each optionally wrapped in `#`
/// marks (upstream scans attribute bodies as tokens, so every string form may appear). A
/// one-line string ends at its line; `None` when there is no closing quote.
fn quoted_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    while bytes.get(i) == Some(&b'#') {
        i += 1;
    }
    let hashes = i - at;
    let q = *bytes.get(i)?;
    if q != b'"' && q != b'\'' {
        return None;
    }
    let multi = bytes.get(i + 1) == Some(&q) && bytes.get(i + 2) == Some(&q);
    let quote_len = if multi { 3 } else { 1 };
    i += quote_len;
    let closes = |j: usize| -> bool {
        (0..quote_len).all(|k| bytes.get(j + k) == Some(&q))
            && (0..hashes).all(|k| bytes.get(j + quote_len + k) == Some(&b'#'))
    };
    while let Some(&c) = bytes.get(i) {
        if c == b'\n' && !multi {
            return None;
        }
        if c == b'\\' {
            // An escape (`\` followed by the string's `#` marks) skips the next byte.
            if (0..hashes).all(|k| bytes.get(i + 1 + k) == Some(&b'#')) {
                i += 2 + hashes;
                continue;
            }
        }
        if closes(i) {
            return Some(i + quote_len + hashes);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(TokenKind, String)> {
        let mut s = Scanner::new(FileId(0), src);
        let mut out = Vec::new();
        for _ in 0..1000 {
            let t = s.next_token();
            if t.kind == TokenKind::Eof {
                break;
            }
            let text = &src[t.span.start as usize..t.span.end as usize];
            out.push((t.kind, text.to_string()));
        }
        out
    }

    fn texts(src: &str) -> String {
        kinds(src)
            .into_iter()
            .map(|(k, t)| match k {
                TokenKind::Comma if t.is_empty() => "⏎".to_string(),
                _ => t,
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn comma_insertion_follows_spec() {
        assert_eq!(texts("a: 1\nb: c\n"), "a : 1 ⏎ b : c ⏎");
        assert_eq!(texts("a: 1 +\n2"), "a : 1 + 2 ⏎");
        assert_eq!(texts("x?\n"), "x ? ⏎");
        assert_eq!(texts("[...]\n"), "[ ... ] ⏎");
        assert_eq!(texts("_|_\n"), "_|_ ⏎");
        assert_eq!(texts("a // c\nb"), "a ⏎ b ⏎");
        assert_eq!(texts("{\n}"), "{ } ⏎");
    }

    #[test]
    fn no_comma_before_a_colon_or_comma_on_a_later_line() {
        // JSON laid out with a line break between a key and its `:`, or before a `,`.
        assert_eq!(
            texts("{\n\"a\"\n: 1\n, \"b\":\n2\n}"),
            "{ \"a\" : 1 , \"b\" : 2 ⏎ } ⏎"
        );
        assert_eq!(texts("a\n\n\t: 1"), "a : 1 ⏎");
        // Not past a comment, and not before any other token.
        assert_eq!(texts("a\n// c\n: 1"), "a ⏎ : 1 ⏎");
        assert_eq!(texts("a\n.b"), "a ⏎ . b ⏎");
    }

    #[test]
    fn identifiers_and_definitions() {
        let k: Vec<_> = kinds("#A _b _#c $d αβ if")
            .into_iter()
            .filter(|t| t.0 != TokenKind::Comma)
            .collect();
        assert!(k.iter().all(|(k, _)| *k == TokenKind::Ident));
        assert_eq!(k.len(), 6);
        assert_eq!(k[2].1, "_#c");
    }

    #[test]
    fn numbers() {
        let k: Vec<_> = kinds("1, 0x1F, 0o7, 0b1, 1_000, 1.5, .5, 1e3, 1Ki, 1.5G, 1.")
            .into_iter()
            .filter(|t| t.0 != TokenKind::Comma)
            .collect();
        let want = [
            TokenKind::Int,
            TokenKind::Int,
            TokenKind::Int,
            TokenKind::Int,
            TokenKind::Int,
            TokenKind::Float,
            TokenKind::Float,
            TokenKind::Float,
            TokenKind::Int,
            TokenKind::Int,
            TokenKind::Float,
        ];
        assert_eq!(k.iter().map(|x| x.0).collect::<Vec<_>>(), want);
        // After a value, `.` is a selector.
        assert_eq!(texts("a.5"), "a . 5 ⏎");
    }

    #[test]
    fn interpolation_segments_nest() {
        let k = kinds(r#""a\(b + "c\(d)e")f""#);
        let got: Vec<_> = k.iter().map(|x| x.0).collect();
        use TokenKind::*;
        assert_eq!(
            got,
            vec![
                InterpStart,
                Ident,
                Add,
                InterpStart,
                Ident,
                InterpEnd,
                InterpEnd,
                Comma
            ]
        );
        assert_eq!(k[0].1, "\"a\\(");
        assert_eq!(k[6].1, ")f\"");
    }

    #[test]
    fn raw_and_multiline_strings() {
        let k = kinds("#\"a\"b\"# ##\"\\#(x)\"## \"\"\"\n  x\n  \"\"\"");
        assert_eq!(k[0].0, TokenKind::String);
        assert_eq!(k[1].0, TokenKind::String);
        assert_eq!(k[2].0, TokenKind::String);
        let k = kinds("#\"\\#(x)\"#");
        assert_eq!(k[0].0, TokenKind::InterpStart);
    }

    #[test]
    fn attributes_are_raw_and_balanced() {
        let k = kinds(r#"@go(a, "x)", (b)) x"#);
        assert_eq!(k[0], (TokenKind::Attribute, r#"@go(a, "x)", (b))"#.into()));
        assert_eq!(k[1].1, "x");
    }

    #[test]
    fn attribute_bodies_hold_every_string_form() {
        let attr = "@test(eq, \"\"\"\n\t)x\n\t\"\"\"\n, #\"a\"b)\"#, '''\n)\n''', 'q)')";
        let k = kinds(&format!("{attr} x"));
        assert_eq!(k[0], (TokenKind::Attribute, attr.into()));
        assert_eq!(k[1].1, "x");
        let mut s = Scanner::new(FileId(0), "@a(\"open) x");
        while s.next_token().kind != TokenKind::Eof {}
        assert!(!s.take_errors().is_empty());
    }

    #[test]
    fn unterminated_string_reports_error() {
        let mut s = Scanner::new(FileId(0), "\"abc\nx");
        let t = s.next_token();
        assert_eq!(t.kind, TokenKind::String);
        assert_eq!(s.take_errors()[0].message, "string literal not terminated");
    }

    #[test]
    fn illegal_character() {
        let mut s = Scanner::new(FileId(0), "a ^ b");
        s.next_token();
        assert_eq!(s.next_token().kind, TokenKind::Illegal);
        assert!(s.take_errors()[0]
            .message
            .starts_with("illegal character U+005E"));
    }
}
