//! Reading and writing `cue.mod/module.cue` (render-spec.md §2.1).
//!
//! A module file is CUE, but its fields are plain data, so this reader accepts the data subset of
//! CUE only: fields with identifier or double-quoted labels (`a: b: 1` chains included), struct and
//! list literals, double-quoted strings with the usual escapes, `true`/`false`/`null`, numbers, `//`
//! comments, and commas or newlines as separators. Anything else (references, expressions,
//! definitions, multi-line strings, attributes) is refused with a message: a published module file
//! is data. Fields that occur twice must agree (CUE unifies them; for data that means equality, and
//! structs merge).
//!
//! Known fields: `module` (required), `language.version`, `source.kind`, `deps` (map from
//! `path@vN` to `{v: "vX.Y.Z", default?: bool}`). Others are kept in [`ModuleFile::other`] and
//! ignored.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::version;

/// One dependency entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dep {
    /// Exact version (`v0.1.0`).
    pub version: String,
    /// `default: true`: imports of this path without a major use this major.
    pub default: bool,
}

/// The parsed contents of a module file.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleFile {
    /// The module path with major suffix.
    pub module: String,
    /// `language.version`, if given.
    pub language_version: Option<String>,
    /// `source.kind`, if given.
    pub source_kind: Option<String>,
    /// Dependencies, keyed by `path@vN`.
    pub deps: BTreeMap<String, Dep>,
    /// Every other top-level field, as data.
    pub other: Map<String, Value>,
}

impl ModuleFile {
    /// Parses module-file bytes, checking the fields this client relies on.
    pub fn parse(src: &[u8]) -> Result<ModuleFile, String> {
        let text = std::str::from_utf8(src).map_err(|_| "module.cue is not valid UTF-8")?;
        let data = Parser::new(text).file()?;
        let mut other = data;
        let module = match other.remove("module") {
            Some(Value::String(s)) => s,
            Some(_) => return Err("module.cue: `module` must be a string".into()),
            None => return Err("module.cue: no `module` field".into()),
        };
        version::split_major(&module).map_err(|e| format!("module.cue: {e}"))?;
        let language_version = match other.remove("language") {
            None => None,
            Some(Value::Object(mut l)) => match l.remove("version") {
                None => None,
                Some(Value::String(v)) => Some(v),
                Some(_) => return Err("module.cue: `language.version` must be a string".into()),
            },
            Some(_) => return Err("module.cue: `language` must be a struct".into()),
        };
        let source_kind = match other.remove("source") {
            None => None,
            Some(Value::Object(mut s)) => match s.remove("kind") {
                None => None,
                Some(Value::String(k)) => Some(k),
                Some(_) => return Err("module.cue: `source.kind` must be a string".into()),
            },
            Some(_) => return Err("module.cue: `source` must be a struct".into()),
        };
        let mut deps = BTreeMap::new();
        match other.remove("deps") {
            None => {}
            Some(Value::Object(d)) => {
                for (path, entry) in d {
                    version::split_major(&path).map_err(|e| format!("module.cue: deps: {e}"))?;
                    let Value::Object(entry) = entry else {
                        return Err(format!("module.cue: deps.{path:?} must be a struct"));
                    };
                    let v = match entry.get("v") {
                        Some(Value::String(v)) => v.clone(),
                        _ => {
                            return Err(format!(
                                "module.cue: deps.{path:?}.v must be a version string"
                            ))
                        }
                    };
                    let (_, major) = version::split_major(&path)?;
                    let vmajor = version::major_of(&v)
                        .map_err(|e| format!("module.cue: deps.{path:?}.v: {e}"))?;
                    if vmajor != major {
                        return Err(format!(
                            "module.cue: deps.{path:?}.v {v} is not in major v{major}"
                        ));
                    }
                    let default = match entry.get("default") {
                        None => false,
                        Some(Value::Bool(b)) => *b,
                        Some(_) => {
                            return Err(format!("module.cue: deps.{path:?}.default must be a bool"))
                        }
                    };
                    deps.insert(
                        path,
                        Dep {
                            version: v,
                            default,
                        },
                    );
                }
            }
            Some(_) => return Err("module.cue: `deps` must be a struct".into()),
        }
        Ok(ModuleFile {
            module,
            language_version,
            source_kind,
            deps,
            other,
        })
    }

    /// Writes the module file as CUE (the fields this type knows; `other` is left out).
    pub fn to_cue(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!("module: {}\n", quote(&self.module)));
        if let Some(v) = &self.language_version {
            out.push_str(&format!("language: {{\n\tversion: {}\n}}\n", quote(v)));
        }
        if let Some(k) = &self.source_kind {
            out.push_str(&format!("source: {{\n\tkind: {}\n}}\n", quote(k)));
        }
        if !self.deps.is_empty() {
            out.push_str("deps: {\n");
            for (path, dep) in &self.deps {
                out.push_str(&format!("\t{}: {{\n", quote(path)));
                out.push_str(&format!("\t\tv: {}\n", quote(&dep.version)));
                if dep.default {
                    out.push_str("\t\tdefault: true\n");
                }
                out.push_str("\t}\n");
            }
            out.push_str("}\n");
        }
        out
    }
}

fn quote(s: &str) -> String {
    // JSON string syntax is valid CUE string syntax.
    Value::String(s.to_string()).to_string()
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser { src, pos: 0 }
    }

    fn err(&self, msg: &str) -> String {
        let line = self.src[..self.pos].bytes().filter(|b| *b == b'\n').count() + 1;
        format!("module.cue:{line}: {msg}")
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    /// Skips spaces and comments; returns whether a newline was crossed.
    fn skip_ws(&mut self) -> bool {
        let mut newline = false;
        while let Some(c) = self.peek() {
            match c {
                b'\n' => {
                    newline = true;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'/' if self.src[self.pos..].starts_with("//") => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        newline
    }

    fn file(&mut self) -> Result<Map<String, Value>, String> {
        self.skip_ws();
        if self.src[self.pos..].starts_with("package ") {
            return Err(self.err("a module file has no package clause"));
        }
        let fields = self.fields(None)?;
        Ok(fields)
    }

    /// Parses fields up to `close` (or the end of input when `None`).
    fn fields(&mut self, close: Option<u8>) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        loop {
            self.skip_ws();
            match (self.peek(), close) {
                (None, None) => return Ok(out),
                (None, Some(_)) => return Err(self.err("unexpected end of file")),
                (Some(c), Some(cl)) if c == cl => {
                    self.pos += 1;
                    return Ok(out);
                }
                _ => {}
            }
            let (label, value) = self.field()?;
            merge_field(&mut out, label, value).map_err(|e| self.err(&e))?;
            let newline = self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if Some(c) == close => {}
                None if close.is_none() => {}
                _ if newline => {}
                _ => return Err(self.err("expected ',' or a newline between fields")),
            }
        }
    }

    fn field(&mut self) -> Result<(String, Value), String> {
        let label = self.label()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.err(&format!("expected ':' after label {label:?}")));
        }
        self.pos += 1;
        self.skip_ws();
        // `a: b: 1` is `a: {b: 1}`.
        let save = self.pos;
        if let Ok(inner) = self.label() {
            self.skip_ws();
            if self.peek() == Some(b':') && !matches!(inner.as_str(), "true" | "false" | "null") {
                self.pos = save;
                let (l, v) = self.field()?;
                let mut m = Map::new();
                m.insert(l, v);
                return Ok((label, Value::Object(m)));
            }
        }
        self.pos = save;
        let value = self.value()?;
        Ok((label, value))
    }

    fn label(&mut self) -> Result<String, String> {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => {
                let start = self.pos;
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                let s = &self.src[start..self.pos];
                if s.starts_with('#') || s.starts_with('_') {
                    return Err(self.err("definitions and hidden fields are not data"));
                }
                Ok(s.to_string())
            }
            _ => Err(self.err("expected a field label")),
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                Ok(Value::Object(self.fields(Some(b'}'))?))
            }
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        return Ok(Value::Array(items));
                    }
                    items.push(self.value()?);
                    self.skip_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {}
                        _ => return Err(self.err("expected ',' or ']' in a list")),
                    }
                }
            }
            Some(b'"') => {
                if self.src[self.pos..].starts_with("\"\"\"") {
                    return Err(self.err("multi-line strings are not supported in module.cue"));
                }
                Ok(Value::String(self.string()?))
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.pos;
                self.pos += 1;
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                let text = &self.src[start..self.pos];
                serde_json::from_str::<serde_json::Number>(text)
                    .map(Value::Number)
                    .map_err(|_| self.err(&format!("unsupported number {text:?}")))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let word = self.label()?;
                match word.as_str() {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" => Ok(Value::Null),
                    _ => Err(self.err(&format!(
                        "{word:?}: references are not allowed in module.cue (data only)"
                    ))),
                }
            }
            _ => Err(self.err("expected a value")),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        // Positioned at the opening quote.
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.src[self.pos..];
            let mut chars = rest.chars();
            let c = chars
                .next()
                .ok_or_else(|| self.err("unterminated string"))?;
            self.pos += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\n' => return Err(self.err("newline in string")),
                '\\' => {
                    let e = chars
                        .next()
                        .ok_or_else(|| self.err("unterminated string"))?;
                    self.pos += e.len_utf8();
                    match e {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'u' => {
                            let hex = self
                                .src
                                .get(self.pos..self.pos + 4)
                                .ok_or_else(|| self.err("bad \\u escape"))?;
                            let n = u32::from_str_radix(hex, 16)
                                .map_err(|_| self.err("bad \\u escape"))?;
                            let ch = char::from_u32(n).ok_or_else(|| self.err("bad \\u escape"))?;
                            out.push(ch);
                            self.pos += 4;
                        }
                        '(' => return Err(self.err("string interpolation is not data")),
                        _ => return Err(self.err(&format!("unsupported escape \\{e}"))),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

/// Adds a field, unifying with an existing one: structs merge, other values must be equal.
fn merge_field(out: &mut Map<String, Value>, label: String, value: Value) -> Result<(), String> {
    match out.get_mut(&label) {
        None => {
            out.insert(label, value);
            Ok(())
        }
        Some(Value::Object(existing)) => match value {
            Value::Object(new) => {
                for (k, v) in new {
                    merge_field(existing, k, v)?;
                }
                Ok(())
            }
            _ => Err(format!("conflicting values for field {label:?}")),
        },
        Some(existing) if *existing == value => Ok(()),
        Some(_) => Err(format!("conflicting values for field {label:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_typical_module_file() {
        let src = br#"
// A comment.
module: "fixtures.test/lib@v0"
language: {
	version: "v0.17.0"
}
source: kind: "self"
deps: {
	"fixtures.test/schema@v0": {
		v:       "v0.1.0"
		default: true
	}
	"fixtures.test/core@v1": {v: "v1.2.0-alpha.1"}, "a.b/c@v2": v: "v2.0.0"
}
custom: x: [1, "two", false, null]
"#;
        let m = ModuleFile::parse(src).unwrap();
        assert_eq!(m.module, "fixtures.test/lib@v0");
        assert_eq!(m.language_version.as_deref(), Some("v0.17.0"));
        assert_eq!(m.source_kind.as_deref(), Some("self"));
        assert_eq!(m.deps.len(), 3);
        assert_eq!(
            m.deps["fixtures.test/schema@v0"],
            Dep {
                version: "v0.1.0".into(),
                default: true
            }
        );
        assert!(!m.deps["fixtures.test/core@v1"].default);
        assert_eq!(m.deps["a.b/c@v2"].version, "v2.0.0");
        assert!(m.other.contains_key("custom"));
    }

    #[test]
    fn round_trips_through_to_cue() {
        let src = br#"module: "a.b/c@v1"
language: version: "v0.17.0"
deps: "x.y/z@v0": {v: "v0.3.0", default: true}
"#;
        let m = ModuleFile::parse(src).unwrap();
        let again = ModuleFile::parse(m.to_cue().as_bytes()).unwrap();
        assert_eq!(m, again);
    }

    #[test]
    fn refuses_non_data_and_bad_fields() {
        for (src, want) in [
            ("language: version: \"v0.17.0\"", "no `module`"),
            ("module: \"a.b/c\"", "major"),
            ("module: x", "references"),
            ("module: \"a.b/c@v0\"\nmodule: \"a.b/d@v0\"", "conflicting"),
            ("module: \"a.b/c@v0\" deps: {}", "expected ','"),
            (
                "module: \"a.b/c@v0\"\ndeps: \"x.y/z@v1\": v: \"v0.1.0\"",
                "not in major",
            ),
            ("module: \"a.b/c@v0\"\ndeps: \"x.y/z@v0\": {}", ".v must be"),
            ("module: \"a.b/\\(x)@v0\"", "interpolation"),
            ("package foo\nmodule: \"a.b/c@v0\"", "package clause"),
        ] {
            let e = ModuleFile::parse(src.as_bytes()).unwrap_err();
            assert!(e.contains(want), "{src:?}: {e}");
        }
    }
}
