//! Decoding of literal tokens (`doc/ref/spec.md`, "Numeric literals" and "String and byte
//! sequence literals"; upstream `cue/literal`).
//!
//! Rules:
//! - `_` separators carry no meaning. `0x`, `0o`, `0b` set the base.
//! - A multiplier `K M G T P` (powers of 1000) or `Ki Mi Gi Ti Pi` (powers of 1024) makes an
//!   integer; a fractional mantissa is multiplied and truncated toward zero (`1.3Ki` = 1331).
//! - A literal with a `.` or an exponent and no multiplier is a float (`1.`, `.5`, `1e3`).
//! - In a string or bytes literal with `n` `#` marks, the escape delimiter is `\` plus `n` `#`; a
//!   backslash not followed by them is literal text.
//! - Escapes: `\a \b \f \n \r \t \v \/ \\`, `\"` (double-quoted only), `\'` (single-quoted only),
//!   `\uXXXX`, `\UXXXXXXXX` (valid code points only); `\xNN` and `\NNN` octal in bytes only. A
//!   backslash before a newline elides the newline.
//! - Multi-line literals: the opening quote's newline is dropped; the whitespace before the closing
//!   quote is the indentation, which every non-blank line must start with and which is removed;
//!   the newline before the closing quote is dropped. Raw carriage returns are discarded.

use bigdecimal::BigDecimal;
use num_bigint::BigInt;
use num_traits::Num;
use std::str::FromStr;

/// A decoded number.
#[derive(Debug)]
pub enum Number {
    /// An integer.
    Int(BigInt),
    /// A decimal float.
    Float(BigDecimal),
}

/// Decodes a number token's text.
pub fn decode_number(text: &str) -> Result<Number, String> {
    // Fast path: a plain decimal integer.
    if text.len() < 19
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text.len() == 1 || !text.starts_with('0'))
    {
        if let Ok(n) = text.parse::<u64>() {
            return Ok(Number::Int(BigInt::from(n)));
        }
    }
    let clean: String = text.chars().filter(|&c| c != '_').collect();
    let lower = clean.to_ascii_lowercase();
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(digits) = lower.strip_prefix(prefix) {
            return BigInt::from_str_radix(digits, radix)
                .map(Number::Int)
                .map_err(|_| format!("invalid number literal {text}"));
        }
    }
    let (mantissa, mult) = split_multiplier(&clean);
    if let Some(mult) = mult {
        // Exact: mantissa = digits / 10^scale.
        let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = format!("{int_part}{frac_part}");
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("invalid number literal {text}"));
        }
        let m = BigInt::from_str(&digits).map_err(|_| format!("invalid number literal {text}"))?;
        let scale = BigInt::from(10u32).pow(frac_part.len() as u32);
        return Ok(Number::Int(m * mult / scale));
    }
    if clean.contains(['.', 'e', 'E']) {
        let s = if clean.starts_with('.') {
            format!("0{clean}")
        } else {
            clean.clone()
        };
        let s = s.replace(".e", ".0e").replace(".E", ".0E");
        let s = s.strip_suffix('.').map(str::to_string).unwrap_or(s);
        let d = BigDecimal::from_str(&s).map_err(|_| format!("invalid number literal {text}"))?;
        if !crate::data::num::exponent_in_range(&d) {
            return Err(format!(
                "number literal {text}: exponent out of range (at most {})",
                crate::data::num::MAX_EXPONENT
            ));
        }
        return Ok(Number::Float(d));
    }
    if clean.len() > 1 && clean.starts_with('0') {
        return Err(format!(
            "illegal integer number {text}: leading zeros are not allowed (use 0o for octal)"
        ));
    }
    BigInt::from_str(&clean)
        .map(Number::Int)
        .map_err(|_| format!("invalid number literal {text}"))
}

fn split_multiplier(s: &str) -> (&str, Option<BigInt>) {
    let (body, binary) = match s.strip_suffix('i') {
        Some(b) => (b, true),
        None => (s, false),
    };
    let Some(last) = body.chars().last() else {
        return (s, None);
    };
    let power = match last {
        'K' => 1u32,
        'M' => 2,
        'G' => 3,
        'T' => 4,
        'P' => 5,
        _ => return (s, None),
    };
    let base = BigInt::from(if binary { 1024u32 } else { 1000u32 });
    (&body[..body.len() - 1], Some(base.pow(power)))
}

/// The shape of a string literal, read from its opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrShape {
    /// Number of `#` marks.
    pub hashes: usize,
    /// `b'"'` or `b'\''`.
    pub quote: u8,
    /// `"""` / `'''`.
    pub multiline: bool,
}

impl StrShape {
    /// Reads the shape from the text of a string token or first interpolation segment.
    pub fn of(text: &str) -> StrShape {
        let b = text.as_bytes();
        let hashes = b.iter().take_while(|&&c| c == b'#').count();
        let quote = b.get(hashes).copied().unwrap_or(b'"');
        let multiline = b.get(hashes + 1) == Some(&quote) && b.get(hashes + 2) == Some(&quote);
        StrShape {
            hashes,
            quote,
            multiline,
        }
    }

    /// `true` for bytes literals.
    pub fn is_bytes(&self) -> bool {
        self.quote == b'\''
    }

    fn quotes(&self) -> usize {
        if self.multiline {
            3
        } else {
            1
        }
    }
}

/// Where a segment sits in its literal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegKind {
    /// A whole literal without interpolation.
    Whole,
    /// From the opening quote through `\(`.
    Start,
    /// From `)` through `\(`.
    Mid,
    /// From `)` through the closing quote.
    End,
}

/// Strips the delimiters of a segment, returning the raw content. `offset` is where the content
/// starts within `text`. Missing delimiters (after a scan error) are tolerated.
pub fn segment_content(text: &str, kind: SegKind, shape: StrShape) -> (usize, &str) {
    let mut end = text.len();
    let start = match kind {
        SegKind::Whole | SegKind::Start => {
            let mut start = shape.hashes + shape.quotes();
            if shape.multiline {
                if let Some(nl) = text.get(start..).and_then(|r| r.find('\n')) {
                    // Only spaces may sit between the quote and the newline (checked by the scanner).
                    start += nl + 1;
                }
            }
            start
        }
        SegKind::Mid | SegKind::End => 1,
    };
    match kind {
        SegKind::Start | SegKind::Mid => {
            let open = format!("\\{}(", "#".repeat(shape.hashes));
            if text.ends_with(&open) {
                end = text.len() - open.len();
            }
        }
        SegKind::Whole | SegKind::End => {
            let q = shape.quote as char;
            let close = format!(
                "{}{}",
                q.to_string().repeat(shape.quotes()),
                "#".repeat(shape.hashes)
            );
            if text.len() >= start + close.len() && text.ends_with(&close) {
                end = text.len() - close.len();
            }
        }
    }
    if start > end || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
        return (start.min(text.len()), "");
    }
    (start, &text[start..end])
}

/// A decoding error at byte `at` of the given segment content.
#[derive(Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Index of the segment.
    pub segment: usize,
    /// Byte offset within the raw content.
    pub at: usize,
    /// The message.
    pub message: String,
}

/// Decodes the raw contents of all segments of one literal. Returns one byte vector per segment
/// (valid UTF-8 for string literals, unless an error was reported).
pub fn decode_segments(raw: &[&str], shape: StrShape) -> (Vec<Vec<u8>>, Vec<DecodeError>) {
    let mut errors = Vec::new();
    // For multi-line literals, dedent first: each segment becomes a list of (raw offset, text)
    // pieces with indentation removed.
    let texts: Vec<Vec<(usize, &str)>> = if shape.multiline {
        dedent(raw, &mut errors)
    } else {
        raw.iter().map(|s| vec![(0, *s)]).collect()
    };
    let mut out = Vec::with_capacity(texts.len());
    for (i, pieces) in texts.iter().enumerate() {
        let mut buf = Vec::new();
        for (off, piece) in pieces {
            unescape(piece, shape, &mut buf, |at, message| {
                errors.push(DecodeError {
                    segment: i,
                    at: off + at,
                    message,
                })
            });
        }
        out.push(buf);
    }
    (out, errors)
}

fn dedent<'s>(raw: &[&'s str], errors: &mut Vec<DecodeError>) -> Vec<Vec<(usize, &'s str)>> {
    let n = raw.len();
    let last = raw.last().copied().unwrap_or("");
    let (indent, last_cut) = match last.rfind('\n') {
        Some(nl) => {
            let ws = &last[nl + 1..];
            if !ws.bytes().all(|b| b == b' ' || b == b'\t') {
                errors.push(DecodeError {
                    segment: n.saturating_sub(1),
                    at: nl + 1,
                    message: "closing quote of multiline string must be on its own line".into(),
                });
            }
            (ws, nl)
        }
        None => {
            if n > 1 || !last.trim_matches([' ', '\t']).is_empty() {
                errors.push(DecodeError {
                    segment: n.saturating_sub(1),
                    at: last.len(),
                    message: "closing quote of multiline string must be on its own line".into(),
                });
                ("", last.len())
            } else {
                ("", 0)
            }
        }
    };
    let mut out = Vec::with_capacity(n);
    for (i, seg) in raw.iter().enumerate() {
        let seg: &'s str = if i + 1 == n { &seg[..last_cut] } else { seg };
        let mut pieces = Vec::new();
        let mut line_start = i == 0;
        let mut pos = 0;
        while pos <= seg.len() {
            let line_end = seg[pos..].find('\n').map_or(seg.len(), |e| pos + e);
            let mut from = pos;
            if line_start {
                let line = &seg[pos..line_end];
                if line.starts_with(indent) {
                    from = pos + indent.len();
                } else if line.bytes().all(|b| b == b' ' || b == b'\t' || b == b'\r') {
                    from = line_end;
                } else {
                    errors.push(DecodeError {
                        segment: i,
                        at: pos,
                        message: "invalid whitespace: line does not start with the indentation of the closing quote".into(),
                    });
                }
            }
            let piece_end = if line_end < seg.len() {
                line_end + 1
            } else {
                line_end
            };
            if from < piece_end {
                pieces.push((from, &seg[from..piece_end]));
            }
            if line_end >= seg.len() {
                break;
            }
            pos = line_end + 1;
            line_start = true;
        }
        out.push(pieces);
    }
    out
}

fn hex_value(s: &str) -> Option<u32> {
    if s.bytes().all(|b| b.is_ascii_hexdigit()) {
        u32::from_str_radix(s, 16).ok()
    } else {
        None
    }
}

fn unescape(s: &str, shape: StrShape, out: &mut Vec<u8>, mut err: impl FnMut(usize, String)) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\r' {
            i += 1;
            continue;
        }
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let marks = (0..shape.hashes).all(|k| b.get(i + 1 + k) == Some(&b'#'));
        if !marks {
            out.push(c);
            i += 1;
            continue;
        }
        let at = i;
        let j = i + 1 + shape.hashes;
        let Some(&e) = b.get(j) else {
            err(at, "unterminated escape sequence".into());
            return;
        };
        let simple = match e {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'/' => Some(b'/'),
            b'\\' => Some(b'\\'),
            b'"' | b'\'' if e == shape.quote => Some(e),
            _ => None,
        };
        if let Some(v) = simple {
            out.push(v);
            i = j + 1;
            continue;
        }
        match e {
            b'\n' => i = j + 1,
            b'\r' if b.get(j + 1) == Some(&b'\n') => i = j + 2,
            b'u' | b'U' => {
                let n = if e == b'u' { 4 } else { 8 };
                let digits = s.get(j + 1..j + 1 + n);
                match digits.and_then(hex_value) {
                    Some(v) => {
                        match char::from_u32(v) {
                            Some(ch) => {
                                let mut tmp = [0u8; 4];
                                out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                            }
                            None => err(at, "escape sequence is invalid Unicode code point".into()),
                        }
                        i = j + 1 + n;
                    }
                    None => {
                        err(
                            at,
                            "invalid escape sequence: too few hexadecimal digits".into(),
                        );
                        i = j + 1;
                    }
                }
            }
            b'x' => {
                match s.get(j + 1..j + 3).and_then(hex_value) {
                    Some(v) if shape.is_bytes() => out.push(v as u8),
                    Some(_) => err(
                        at,
                        "hexadecimal escapes are only allowed in bytes literals".into(),
                    ),
                    None => err(
                        at,
                        "invalid escape sequence: too few hexadecimal digits".into(),
                    ),
                }
                i = (j + 3).min(b.len());
                while i < b.len() && !s.is_char_boundary(i) {
                    i += 1;
                }
            }
            b'0'..=b'7' => {
                let digits = s.get(j..j + 3);
                let v = digits.filter(|d| d.bytes().all(|c| (b'0'..=b'7').contains(&c)));
                match v.and_then(|d| u32::from_str_radix(d, 8).ok()) {
                    Some(v) if v > 255 => err(at, "octal escape value > 255".into()),
                    Some(v) if shape.is_bytes() => out.push(v as u8),
                    Some(_) => err(
                        at,
                        "octal escapes are only allowed in bytes literals".into(),
                    ),
                    None => err(
                        at,
                        "invalid escape sequence: expected three octal digits".into(),
                    ),
                }
                i = (j + 3).min(b.len());
                while i < b.len() && !s.is_char_boundary(i) {
                    i += 1;
                }
            }
            _ => {
                let ch = s.get(j..).and_then(|r| r.chars().next()).unwrap_or('?');
                err(at, format!("unknown escape sequence \\{ch}"));
                i = j + ch.len_utf8();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(s: &str) -> String {
        match decode_number(s).unwrap() {
            Number::Int(i) => i.to_string(),
            Number::Float(f) => format!("float {f}"),
        }
    }

    #[test]
    fn numbers_decode_exactly() {
        assert_eq!(int("1_000"), "1000");
        assert_eq!(int("0xBad_Face"), "195951310");
        assert_eq!(int("0o755"), "493");
        assert_eq!(int("0b0101_0001"), "81");
        assert_eq!(int("1.5G"), "1500000000");
        assert_eq!(int("1.3Ki"), "1331");
        assert_eq!(int("1Mi"), "1048576");
        assert_eq!(int(".5K"), "500");
        assert_eq!(int("1.5"), "float 1.5");
        assert_eq!(int(".25"), "float 0.25");
        assert_eq!(int("1."), "float 1");
        assert_eq!(int("1E6"), "float 1000000");
        assert_eq!(int("1.e+0"), "float 1.0");
        assert_eq!(int("072.40"), "float 72.40");
        assert!(decode_number("07").is_err());
    }

    fn dec(raw: &[&str], src_shape: &str) -> (Vec<String>, Vec<String>) {
        let shape = StrShape::of(src_shape);
        let (out, errs) = decode_segments(raw, shape);
        (
            out.into_iter()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect(),
            errs.into_iter().map(|e| e.message).collect(),
        )
    }

    #[test]
    fn escapes() {
        let (s, e) = dec(&[r#"a\n\t\u00e9\U0001F600\"\/"#], "\"");
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(s[0], "a\n\té😀\"/");
        let (_, e) = dec(&[r"\x41"], "\"");
        assert_eq!(e.len(), 1);
        let shape = StrShape::of("'");
        let (b, e) = decode_segments(&[r"\x41\101\377"], shape);
        assert!(e.is_empty());
        assert_eq!(b[0], vec![0x41, 0x41, 0xff]);
        let (s, e) = dec(&[r"\n\#n"], "#\"");
        assert!(e.is_empty());
        assert_eq!(s[0], "\\n\n");
        let (_, e) = dec(&[r"\q"], "\"");
        assert_eq!(e[0], "unknown escape sequence \\q");
        let (_, e) = dec(&[r"\uD800"], "\"");
        assert_eq!(e[0], "escape sequence is invalid Unicode code point");
    }

    #[test]
    fn multiline_dedent() {
        let raw = "    lily:\n    picking \\\n    bugs\n\n        x\n    ";
        let (s, e) = dec(&[raw], "\"\"\"");
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(s[0], "lily:\npicking bugs\n\n    x");
        let (_, e) = dec(&["  a\n b\n  "], "\"\"\"");
        assert_eq!(e.len(), 1);
        // Segments around an interpolation: only line starts are dedented.
        let (s, e) = dec(&["  a ", " b\n  c\n  "], "\"\"\"");
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(s, vec!["a ".to_string(), " b\nc".to_string()]);
    }
}
