//! Value paths: [`Path`] and [`Selector`], the addresses the `Value` API takes and diagnostics
//! print.
//!
//! Rules (docs/design/render.md §1.3–§1.8 address values by path; CUE `doc/ref/spec.md`, "Field
//! declarations" and "Identifiers"):
//! - a path is a sequence of selectors separated by `.`; a selector is a regular field (an
//!   identifier, or a quoted string when the label is not an identifier), a definition (`#D`), a
//!   hidden field (`_x`, `_#x`) or a list index;
//! - an index is written `[N]` (`a.b[0]`, CUE's path syntax, what [`Path`]'s `Display` prints
//!   and what [`crate::DiagnosticReport::path`] carries) or `.N` (`a.b.0`, as `cue` prints error
//!   paths and [`crate::Diagnostic::path`] keeps them, for CLI parity); both parse to
//!   [`Selector::Index`], so `Path::parse(&d.path)` of any diagnostic gives back its path, and
//!   [`Path::diagnostic_text`] prints the `.N` form;
//! - a quoted label takes JSON escapes and the `\u{…}` escape the evaluator prints;
//! - an unquoted digit string is an index: a regular field named `0` is written `"0"`;
//! - hidden fields are those of the main package of the build (as in CUE's own path syntax,
//!   which has no package qualifier); those of an imported package are reached with
//!   [`crate::Value::lookup_hidden`];
//! - the empty string is the empty path (the value itself);
//! - [`Selector::Pattern`] names a pattern constraint (`[string]: T`) by its filter as CUE text:
//!   [`crate::Value::fields_where`] yields it; it is never parsed from path text, selects nothing
//!   in [`crate::Value::lookup_path`] (a pattern is not a field) and is printed `[filter]`.

use crate::adt::{is_ident, Label};
use std::fmt;

/// One step of a [`Path`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Selector {
    /// A regular field, by its label (unquoted).
    Field(String),
    /// A definition, by its identifier including `#` (`#Def`).
    Definition(String),
    /// A hidden field or hidden definition of the main package, including `_` (`_x`, `_#x`).
    Hidden(String),
    /// A list element.
    Index(usize),
    /// A pattern constraint, by its label filter as CUE text (`string`, `=~"^x-"`).
    Pattern(String),
}

impl Selector {
    /// A selector for an identifier as written: `#a` is a definition, `_a` hidden, anything
    /// else (including a label that is not an identifier) a regular field.
    pub fn ident(name: &str) -> Selector {
        if name.starts_with('#') {
            Selector::Definition(name.to_string())
        } else if name.starts_with('_') && name.len() > 1 {
            Selector::Hidden(name.to_string())
        } else {
            Selector::Field(name.to_string())
        }
    }

    /// The evaluator's label for this selector.
    pub(crate) fn label(&self) -> Label {
        match self {
            Selector::Field(s) => Label::string(s),
            Selector::Definition(s) | Selector::Hidden(s) => Label::ident(s),
            Selector::Index(i) => Label::index(*i),
            // Never an arc's label: the evaluator's arcs have no internal label of this form.
            Selector::Pattern(s) => Label::internal(&format!("[{s}]")),
        }
    }

    /// The selector of an evaluator label; `None` for internal slots.
    pub(crate) fn of_label(l: &Label) -> Option<Selector> {
        use crate::adt::LabelKind as K;
        match l.kind {
            K::Regular => Some(Selector::Field(l.name.to_string())),
            K::Def => Some(Selector::Definition(l.name.to_string())),
            K::Hidden | K::HiddenDef => Some(Selector::Hidden(l.name.to_string())),
            K::Index => Some(Selector::Index(l.index as usize)),
            K::Internal => None,
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Field(s) if is_ident(s) && !s.starts_with(['#', '_']) => f.write_str(s),
            Selector::Field(s) => f.write_str(&quote(s)),
            Selector::Definition(s) | Selector::Hidden(s) => f.write_str(s),
            Selector::Index(i) => write!(f, "{i}"),
            Selector::Pattern(s) => write!(f, "[{s}]"),
        }
    }
}

/// A value path: selectors from a value down to one of its descendants.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path {
    selectors: Vec<Selector>,
}

/// Why a path text does not parse (carried by [`crate::Error::Path`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    /// A selector is empty (`a..b`, a leading or trailing `.`).
    Empty {
        /// The path text.
        path: String,
        /// Byte offset.
        at: usize,
    },
    /// An unquoted selector is not an identifier or an index.
    NotIdent {
        /// The path text.
        path: String,
        /// The selector text.
        selector: String,
    },
    /// A quoted label is not closed or has a bad escape.
    BadQuote {
        /// The path text.
        path: String,
        /// Byte offset.
        at: usize,
    },
    /// A `[...]` index is not a decimal number or is not closed.
    BadIndex {
        /// The path text.
        path: String,
        /// Byte offset.
        at: usize,
    },
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathError::Empty { path, at } => {
                write!(f, "path {path:?}: empty selector at byte {at}")
            }
            PathError::NotIdent { path, selector } => write!(
                f,
                "path {path:?}: {selector:?} is neither an identifier nor an index (quote it)"
            ),
            PathError::BadQuote { path, at } => {
                write!(f, "path {path:?}: bad quoted label at byte {at}")
            }
            PathError::BadIndex { path, at } => write!(f, "path {path:?}: bad index at byte {at}"),
        }
    }
}

impl Path {
    /// The empty path.
    pub fn root() -> Path {
        Path::default()
    }

    /// A path of the given selectors.
    pub fn new(selectors: Vec<Selector>) -> Path {
        Path { selectors }
    }

    /// The selectors.
    pub fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    /// This path followed by `s`.
    pub fn child(&self, s: Selector) -> Path {
        let mut p = self.clone();
        p.selectors.push(s);
        p
    }

    /// `true` for the empty path.
    pub fn is_root(&self) -> bool {
        self.selectors.is_empty()
    }

    /// Parses a path as written in diagnostics (`a.b.0`, `a."x-y".#D`) or with bracketed
    /// indices (`a.b[0]`). See the module docs for the rules.
    pub fn parse(text: &str) -> Result<Path, PathError> {
        let b = text.as_bytes();
        let mut sels = Vec::new();
        let mut i = 0;
        if text.is_empty() {
            return Ok(Path::root());
        }
        loop {
            // One selector starts at `i`.
            match b.get(i) {
                // A path may start with an index (`[0].a`, a list at the top).
                Some(b'[') if i == 0 => {}
                None | Some(b'.') => {
                    return Err(PathError::Empty {
                        path: text.into(),
                        at: i,
                    })
                }
                Some(b'"') => {
                    let (s, next) = unquote(text, i).ok_or_else(|| PathError::BadQuote {
                        path: text.into(),
                        at: i,
                    })?;
                    sels.push(Selector::Field(s));
                    i = next;
                }
                Some(_) => {
                    let end = text[i..].find(['.', '[']).map_or(text.len(), |k| i + k);
                    let word = &text[i..end];
                    if word.is_empty() {
                        return Err(PathError::Empty {
                            path: text.into(),
                            at: i,
                        });
                    }
                    if word.bytes().all(|c| c.is_ascii_digit()) {
                        let n = word.parse::<usize>().map_err(|_| PathError::BadIndex {
                            path: text.into(),
                            at: i,
                        })?;
                        sels.push(Selector::Index(n));
                    } else if is_ident(word) || word.strip_prefix("_#").is_some_and(is_ident) {
                        sels.push(Selector::ident(word));
                    } else {
                        return Err(PathError::NotIdent {
                            path: text.into(),
                            selector: word.into(),
                        });
                    }
                    i = end;
                }
            }
            // Bracketed indices after the selector.
            while b.get(i) == Some(&b'[') {
                let close = text[i..].find(']').map(|k| i + k);
                let n = close
                    .and_then(|c| {
                        let d = &text[i + 1..c];
                        (!d.is_empty() && d.bytes().all(|x| x.is_ascii_digit()))
                            .then(|| d.parse::<usize>().ok())
                            .flatten()
                    })
                    .ok_or_else(|| PathError::BadIndex {
                        path: text.into(),
                        at: i,
                    })?;
                sels.push(Selector::Index(n));
                i = close.map_or(text.len(), |c| c + 1);
            }
            match b.get(i) {
                None => break,
                Some(b'.') => i += 1,
                Some(_) => {
                    return Err(PathError::NotIdent {
                        path: text.into(),
                        selector: text[i..].into(),
                    })
                }
            }
        }
        Ok(Path { selectors: sels })
    }
}

/// A CUE double-quoted string literal denoting `s` (the project's one string quoter: labels in
/// paths, generated CUE files, messages that name a label). JSON string syntax is CUE string
/// syntax, and `\(` cannot occur in the result because every backslash is escaped.
pub fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Reads a quoted label starting at byte `at` (the opening quote); returns the label and the
/// byte after the closing quote.
fn unquote(text: &str, at: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut chars = text.get(at + 1..)?.char_indices();
    while let Some((k, c)) = chars.next() {
        match c {
            '"' => return Some((out, at + 1 + k + 1)),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '/' => out.push('/'),
                    '\'' => out.push('\''),
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    '0' => out.push('\0'),
                    'u' => {
                        let rest = chars.as_str();
                        let (hex, used) = if let Some(r) = rest.strip_prefix('{') {
                            let close = r.find('}')?;
                            (&r[..close], close + 2)
                        } else {
                            (rest.get(..4)?, 4)
                        };
                        let cp = u32::from_str_radix(hex, 16).ok()?;
                        out.push(char::from_u32(cp)?);
                        for _ in 0..used {
                            chars.next()?;
                        }
                    }
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    None
}

impl Path {
    /// The path as `cue` prints error paths: selectors joined by `.`, indices as `.N`.
    pub fn diagnostic_text(&self) -> String {
        let mut out = String::new();
        for (k, s) in self.selectors.iter().enumerate() {
            if k > 0 {
                out.push('.');
            }
            out.push_str(&s.to_string());
        }
        out
    }
}

impl fmt::Display for Path {
    /// Prints CUE's path syntax: selectors joined by `.`, indices as `[N]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, s) in self.selectors.iter().enumerate() {
            match s {
                Selector::Index(i) => write!(f, "[{i}]")?,
                s => {
                    if k > 0 {
                        f.write_str(".")?;
                    }
                    write!(f, "{s}")?;
                }
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for Path {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Path, PathError> {
        Path::parse(s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_selector_form() {
        let p = Path::parse(r#"a."x-y".#D._h._#g.0[2]"#).unwrap();
        assert_eq!(
            p.selectors(),
            &[
                Selector::Field("a".into()),
                Selector::Field("x-y".into()),
                Selector::Definition("#D".into()),
                Selector::Hidden("_h".into()),
                Selector::Hidden("_#g".into()),
                Selector::Index(0),
                Selector::Index(2),
            ]
        );
        assert_eq!(p.to_string(), r#"a."x-y".#D._h._#g[0][2]"#);
        assert_eq!(p.diagnostic_text(), r#"a."x-y".#D._h._#g.0.2"#);
        assert_eq!(Path::parse(&p.to_string()).unwrap(), p);
        assert_eq!(Path::parse(&p.diagnostic_text()).unwrap(), p);
        let top = Path::new(vec![Selector::Index(1), Selector::Field("a".into())]);
        assert_eq!(top.to_string(), "[1].a");
        assert_eq!(Path::parse("[1].a").unwrap(), top);
    }

    #[test]
    fn quoted_labels_round_trip() {
        for label in [
            "0",
            "a.b",
            "with \"quote\"",
            "tab\there",
            "é",
            "#notdef",
            "_",
            "",
        ] {
            let p = Path::root().child(Selector::Field(label.into()));
            assert_eq!(Path::parse(&p.to_string()).unwrap(), p, "{label:?} -> {p}");
        }
        assert_eq!(
            Path::parse(r#""\u00e9\u{1F600}""#).unwrap().selectors(),
            &[Selector::Field("é😀".into())]
        );
    }

    #[test]
    fn bad_paths_are_typed_errors() {
        assert!(matches!(Path::parse("a..b"), Err(PathError::Empty { .. })));
        assert!(matches!(Path::parse("a."), Err(PathError::Empty { .. })));
        assert!(matches!(
            Path::parse("a-b"),
            Err(PathError::NotIdent { .. })
        ));
        assert!(matches!(
            Path::parse("\"a"),
            Err(PathError::BadQuote { .. })
        ));
        assert!(matches!(
            Path::parse("a[x]"),
            Err(PathError::BadIndex { .. })
        ));
        assert!(matches!(
            Path::parse("a[1"),
            Err(PathError::BadIndex { .. })
        ));
        assert_eq!(Path::parse("").unwrap(), Path::root());
    }
}
