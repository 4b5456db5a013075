//! Reading `cue.mod/module.cue` without the evaluator (docs/design/render.md §2.1; upstream
//! `mod/modfile`).
//!
//! Rules:
//! - The file is CUE with literal values only: fields (regular, possibly quoted labels and the
//!   `a: b: v` shorthand), struct literals, strings, booleans, numbers, `null` and lists. Repeated
//!   fields merge when both are structs and must be equal otherwise. Anything else (references,
//!   operators, comprehensions, ...) is an error naming its position.
//! - `module` is required: a module path with an optional major suffix `@vN`; without a suffix
//!   the major is `v0`.
//! - `language.version`, if present, is a canonical semver (`v0.16.0`).
//! - `source.kind` is `"self"` or `"git"`.
//! - `deps` maps `path@vN` to `{v: "vX.Y.Z", default?: bool}`; `v`'s major must match the key's,
//!   and at most one major of a path may be `default: true`.
//! - Known top-level fields: `module`, `language`, `source`, `deps`, `description`, `custom`;
//!   others are errors (the upstream schema is closed).

use super::semver::{self, Version};
use crate::ast::{Decl, Expr, FieldConstraint, Label, StrPart};
use crate::parser::parse_file;
use crate::source::{FileId, Span};
use std::collections::BTreeMap;

/// A dependency entry of `deps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dep {
    /// The exact version (`v1.2.3`).
    pub version: String,
    /// `default: true`: imports of this path without a major use this one.
    pub default: bool,
}

/// `source.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// The module zip holds the files of the module directory.
    SelfFiles,
    /// The module zip holds the VCS-tracked files.
    Git,
}

/// A parsed `cue.mod/module.cue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleFile {
    /// The module path as written (`example.com/x@v0`, or `example.com/x`).
    pub module: String,
    /// `language.version`, if given.
    pub language_version: Option<String>,
    /// `source.kind`, if given.
    pub source: Option<SourceKind>,
    /// Dependencies by `path@vN`.
    pub deps: BTreeMap<String, Dep>,
}

/// An error in a module file, with its position (carried by [`crate::module::LoadError`] and
/// [`crate::Error::ModuleFile`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleFileError {
    /// Where the problem is.
    pub span: Span,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ModuleFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ModuleFile {
    /// Parses `cue.mod/module.cue` bytes on their own (no source map): the first error, as
    /// `module.cue:LINE:COL: message`.
    pub fn parse(src: &[u8]) -> Result<ModuleFile, String> {
        let text = std::str::from_utf8(src).map_err(|e| format!("module.cue: not UTF-8: {e}"))?;
        let mut map = crate::source::SourceMap::new();
        let id = map.add("module.cue", text);
        parse_module_file(id, text).map_err(|errs| {
            let e = errs.first();
            let msg = e.map_or("invalid module file", |e| e.message.as_str());
            match e.and_then(|e| map.position(e.span)) {
                Some((f, l, c)) => format!("{f}:{l}:{c}: {msg}"),
                None => msg.to_string(),
            }
        })
    }

    /// Writes the module file as CUE: `module`, `language.version`, `source.kind` and `deps`
    /// (sorted by key), the fields this type holds; [`ModuleFile::parse`] reads it back equal.
    pub fn to_cue(&self) -> String {
        let q = crate::path::quote;
        let mut out = format!("module: {}\n", q(&self.module));
        if let Some(v) = &self.language_version {
            out.push_str(&format!("language: {{\n\tversion: {}\n}}\n", q(v)));
        }
        if let Some(k) = self.source {
            let k = match k {
                SourceKind::SelfFiles => "self",
                SourceKind::Git => "git",
            };
            out.push_str(&format!("source: {{\n\tkind: {}\n}}\n", q(k)));
        }
        if !self.deps.is_empty() {
            out.push_str("deps: {\n");
            for (path, dep) in &self.deps {
                out.push_str(&format!("\t{}: {{\n\t\tv: {}\n", q(path), q(&dep.version)));
                if dep.default {
                    out.push_str("\t\tdefault: true\n");
                }
                out.push_str("\t}\n");
            }
            out.push_str("}\n");
        }
        out
    }

    /// The module path without the major suffix (`example.com/x`).
    pub fn path(&self) -> &str {
        split_major(&self.module).0
    }

    /// The major suffix (`v0` when not written).
    pub fn major(&self) -> &str {
        split_major(&self.module).1.unwrap_or("v0")
    }

    /// The module path with its major suffix (`example.com/x@v0`).
    pub fn path_with_major(&self) -> String {
        format!("{}@{}", self.path(), self.major())
    }
}

/// Splits `path@vN` into the path and the major, if any.
pub fn split_major(p: &str) -> (&str, Option<&str>) {
    match p.rsplit_once('@') {
        Some((base, major)) => (base, Some(major)),
        None => (p, None),
    }
}

/// A literal value read from the file.
#[derive(Clone, Debug, PartialEq)]
enum Lit {
    Str(String),
    Bool(bool),
    Null,
    Num(String),
    List(Vec<(Lit, Span)>),
    Struct(BTreeMap<String, (Lit, Span)>),
}

fn err(span: Span, message: impl Into<String>) -> ModuleFileError {
    ModuleFileError {
        span,
        message: message.into(),
    }
}

fn label_name(l: &Label) -> Result<String, ModuleFileError> {
    match l {
        Label::Ident(i) if !i.name.starts_with('#') && !i.name.starts_with('_') => {
            Ok(i.name.clone())
        }
        Label::String { parts, span } => match parts.as_slice() {
            [StrPart::Text(s)] => Ok(s.clone()),
            [] => Ok(String::new()),
            _ => Err(err(
                *span,
                "module.cue: interpolated labels are not allowed",
            )),
        },
        other => Err(err(
            other.span(),
            "module.cue: only plain field labels are allowed",
        )),
    }
}

fn decls_to_struct(decls: &[Decl]) -> Result<BTreeMap<String, (Lit, Span)>, ModuleFileError> {
    let mut out: BTreeMap<String, (Lit, Span)> = BTreeMap::new();
    for d in decls {
        match d {
            Decl::Field(f) => {
                if f.constraint != FieldConstraint::Regular {
                    return Err(err(
                        f.span,
                        "module.cue: optional and required fields are not allowed",
                    ));
                }
                if f.label_alias.is_some() || f.value_alias.is_some() {
                    return Err(err(f.span, "module.cue: aliases are not allowed"));
                }
                let name = label_name(&f.label)?;
                let v = expr_to_lit(&f.value)?;
                let span = f.value.span();
                match out.remove(&name) {
                    None => {
                        out.insert(name, (v, span));
                    }
                    Some(old) => {
                        let merged = merge(old, (v, span))?;
                        out.insert(name, merged);
                    }
                }
            }
            Decl::Attribute(_) => {}
            Decl::Embed(Expr::Struct(s)) => {
                for (k, v) in decls_to_struct(&s.decls)? {
                    let merged = match out.remove(&k) {
                        Some(old) => merge(old, v)?,
                        None => v,
                    };
                    out.insert(k, merged);
                }
            }
            Decl::Bad(s) => return Err(err(*s, "module.cue: syntax error")),
            Decl::Embed(e) => return Err(err(e.span(), "module.cue: only fields are allowed")),
            Decl::Let(l) => return Err(err(l.span, "module.cue: let is not allowed")),
            Decl::Ellipsis { span, .. } => {
                return Err(err(*span, "module.cue: ... is not allowed"))
            }
            Decl::Comprehension(c) => {
                return Err(err(c.span, "module.cue: comprehensions are not allowed"))
            }
        }
    }
    Ok(out)
}

fn merge(a: (Lit, Span), b: (Lit, Span)) -> Result<(Lit, Span), ModuleFileError> {
    match (a, b) {
        ((Lit::Struct(mut x), sa), (Lit::Struct(y), _)) => {
            for (k, v) in y {
                let m = match x.remove(&k) {
                    Some(old) => merge(old, v)?,
                    None => v,
                };
                x.insert(k, m);
            }
            Ok((Lit::Struct(x), sa))
        }
        ((x, sa), (y, sb)) => {
            if x == y {
                Ok((x, sa))
            } else {
                Err(err(sb, "module.cue: conflicting values for the same field"))
            }
        }
    }
}

fn expr_to_lit(e: &Expr) -> Result<Lit, ModuleFileError> {
    Ok(match e {
        Expr::Str {
            parts,
            bytes: false,
            span,
        } => match parts.as_slice() {
            [StrPart::Text(s)] => Lit::Str(s.clone()),
            [] => Lit::Str(String::new()),
            _ => return Err(err(*span, "module.cue: interpolation is not allowed")),
        },
        Expr::Bool(b, _) => Lit::Bool(*b),
        Expr::Null(_) => Lit::Null,
        Expr::Int(i, _) => Lit::Num(i.to_string()),
        Expr::Float(f, _) => Lit::Num(f.to_string()),
        Expr::Struct(s) => Lit::Struct(decls_to_struct(&s.decls)?),
        Expr::List { elems, span } => {
            let mut out = Vec::new();
            for el in elems {
                match el {
                    crate::ast::ListElem::Expr(x) => out.push((expr_to_lit(x)?, x.span())),
                    _ => {
                        return Err(err(
                            *span,
                            "module.cue: only literal list elements are allowed",
                        ))
                    }
                }
            }
            Lit::List(out)
        }
        Expr::Paren(inner, _) => expr_to_lit(inner)?,
        other => {
            return Err(err(
                other.span(),
                "module.cue: only literal values are allowed (no references or expressions)",
            ))
        }
    })
}

fn want_str(v: &(Lit, Span), what: &str) -> Result<String, ModuleFileError> {
    match &v.0 {
        Lit::Str(s) => Ok(s.clone()),
        _ => Err(err(v.1, format!("module.cue: {what} must be a string"))),
    }
}

fn want_struct<'v>(
    v: &'v (Lit, Span),
    what: &str,
) -> Result<&'v BTreeMap<String, (Lit, Span)>, ModuleFileError> {
    match &v.0 {
        Lit::Struct(s) => Ok(s),
        _ => Err(err(v.1, format!("module.cue: {what} must be a struct"))),
    }
}

/// Checks a module path (without major) by the shared rules of [`super::path::check_path`].
pub fn check_module_path(p: &str) -> Result<(), String> {
    super::path::check_path(p).map_err(|e| e.to_string())
}

/// Parses and checks `cue.mod/module.cue` text. Syntax errors come first (all of them).
pub fn parse_module_file(file: FileId, src: &str) -> Result<ModuleFile, Vec<ModuleFileError>> {
    let (ast, perrs) = parse_file(file, src);
    if !perrs.is_empty() {
        return Err(perrs.into_iter().map(|e| err(e.span, e.message)).collect());
    }
    let whole = ast.span;
    if let Some(p) = &ast.package {
        return Err(vec![err(
            p.span,
            "module.cue: package clause is not allowed",
        )]);
    }
    if let Some(i) = ast.imports.first() {
        return Err(vec![err(i.span, "module.cue: imports are not allowed")]);
    }
    let top = decls_to_struct(&ast.decls).map_err(|e| vec![e])?;
    let mut errors = Vec::new();
    for (k, (_, span)) in &top {
        if !matches!(
            k.as_str(),
            "module" | "language" | "source" | "deps" | "description" | "custom"
        ) {
            errors.push(err(*span, format!("module.cue: unknown field {k:?}")));
        }
    }
    let module = match top.get("module") {
        None => {
            errors.push(err(
                Span::new(file, 0, whole.end.min(1)),
                "module.cue: no module field",
            ));
            String::new()
        }
        Some(v) => match want_str(v, "module") {
            Ok(m) => {
                let (base, major) = split_major(&m);
                if let Err(e) = check_module_path(base) {
                    errors.push(err(v.1, format!("module.cue: {e}")));
                }
                if let Some(major) = major {
                    if !semver::is_major(major) {
                        errors.push(err(v.1, format!("module.cue: invalid major version suffix @{major} in module path (want @vN)")));
                    }
                }
                m
            }
            Err(e) => {
                errors.push(e);
                String::new()
            }
        },
    };
    let mut language_version = None;
    if let Some(lang) = top.get("language") {
        match want_struct(lang, "language") {
            Ok(l) => {
                for (k, v) in l {
                    if k != "version" {
                        errors.push(err(v.1, format!("module.cue: unknown field language.{k}")));
                    }
                }
                if let Some(v) = l.get("version") {
                    match want_str(v, "language.version") {
                        Ok(s) if Version::parse(&s).is_some() => language_version = Some(s),
                        Ok(s) => errors.push(err(
                            v.1,
                            format!("module.cue: language.version {s:?} is not a canonical semver (like v0.16.0)"),
                        )),
                        Err(e) => errors.push(e),
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
    let mut source = None;
    if let Some(src_v) = top.get("source") {
        match want_struct(src_v, "source") {
            Ok(s) => match s.get("kind") {
                Some(k) => match want_str(k, "source.kind").as_deref() {
                    Ok("self") => source = Some(SourceKind::SelfFiles),
                    Ok("git") => source = Some(SourceKind::Git),
                    Ok(other) => errors.push(err(
                        k.1,
                        format!(
                            "module.cue: source.kind must be \"self\" or \"git\", not {other:?}"
                        ),
                    )),
                    Err(e) => errors.push(e.clone()),
                },
                None => errors.push(err(src_v.1, "module.cue: source.kind is required")),
            },
            Err(e) => errors.push(e),
        }
    }
    let mut deps = BTreeMap::new();
    if let Some(d) = top.get("deps") {
        match want_struct(d, "deps") {
            Ok(entries) => {
                let mut defaults: BTreeMap<&str, &str> = BTreeMap::new();
                for (key, v) in entries {
                    let (base, major) = split_major(key);
                    let Some(major) = major.filter(|m| semver::is_major(m)) else {
                        errors.push(err(v.1, format!("module.cue: dependency {key:?} must have a major version suffix (path@vN)")));
                        continue;
                    };
                    if let Err(e) = check_module_path(base) {
                        errors.push(err(v.1, format!("module.cue: dependency {key:?}: {e}")));
                        continue;
                    }
                    let fields = match want_struct(v, &format!("deps[{key:?}]")) {
                        Ok(f) => f,
                        Err(e) => {
                            errors.push(e);
                            continue;
                        }
                    };
                    for (k, fv) in fields {
                        if k != "v" && k != "default" {
                            errors.push(err(
                                fv.1,
                                format!("module.cue: unknown field {k:?} in dependency {key:?}"),
                            ));
                        }
                    }
                    let version = match fields.get("v") {
                        Some(fv) => match want_str(fv, "v") {
                            Ok(s) => match Version::parse(&s) {
                                Some(ver) if format!("v{}", ver.major) == major => s,
                                Some(_) => {
                                    errors.push(err(fv.1, format!("module.cue: version {s:?} of {key:?} does not match its major version {major}")));
                                    continue;
                                }
                                None => {
                                    errors.push(err(fv.1, format!("module.cue: version {s:?} of {key:?} is not a canonical semver")));
                                    continue;
                                }
                            },
                            Err(e) => {
                                errors.push(e);
                                continue;
                            }
                        },
                        None => {
                            errors.push(err(
                                v.1,
                                format!("module.cue: dependency {key:?} has no version (v)"),
                            ));
                            continue;
                        }
                    };
                    let default = match fields.get("default") {
                        None => false,
                        Some((Lit::Bool(b), _)) => *b,
                        Some((_, s)) => {
                            errors.push(err(*s, "module.cue: default must be a bool"));
                            false
                        }
                    };
                    if default {
                        if let Some(prev) = defaults.insert(base, major) {
                            errors.push(err(v.1, format!("module.cue: multiple default major versions for {base}: {prev} and {major}")));
                        }
                    }
                    deps.insert(key.clone(), Dep { version, default });
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(ModuleFile {
        module,
        language_version,
        source,
        deps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<ModuleFile, Vec<String>> {
        parse_module_file(FileId(0), src).map_err(|v| v.into_iter().map(|e| e.message).collect())
    }

    #[test]
    fn reads_a_full_module_file() {
        let m = parse(
            r#"
module: "example.com/x@v1"
language: version: "v0.16.0"
source: kind: "self"
deps: {
    "cue.dev/x/k8s.io@v0": { v: "v0.7.0", default: true }
    "opmodel.dev/core@v2": v: "v2.0.0-alpha.4"
}
description: "a module"
"#,
        )
        .unwrap();
        assert_eq!(m.module, "example.com/x@v1");
        assert_eq!(m.path(), "example.com/x");
        assert_eq!(m.major(), "v1");
        assert_eq!(m.language_version.as_deref(), Some("v0.16.0"));
        assert_eq!(m.source, Some(SourceKind::SelfFiles));
        assert_eq!(
            m.deps["cue.dev/x/k8s.io@v0"],
            Dep {
                version: "v0.7.0".into(),
                default: true
            }
        );
        assert!(!m.deps["opmodel.dev/core@v2"].default);
    }

    #[test]
    fn module_without_major_is_v0() {
        let m = parse("module: \"mod.test\"\nlanguage: version: \"v0.9.0\"").unwrap();
        assert_eq!(m.path_with_major(), "mod.test@v0");
    }

    #[test]
    fn repeated_structs_merge() {
        let m = parse("module: \"a.b/c\"\ndeps: \"x.y/z@v1\": v: \"v1.0.0\"\ndeps: \"x.y/z@v1\": default: true").unwrap();
        assert!(m.deps["x.y/z@v1"].default);
    }

    #[test]
    fn errors_are_clear() {
        let cases: &[(&str, &str)] = &[
            ("language: version: \"v0.16.0\"", "no module field"),
            ("module: 1", "module must be a string"),
            ("module: x", "only literal values are allowed"),
            ("module: \"a.b/c\"\nfoo: 1", "unknown field \"foo\""),
            ("module: \"a.b/c@1\"", "invalid major version suffix"),
            ("module: \"a.b//c\"", "empty path element"),
            ("module: \"a.b/c\"\nlanguage: version: \"0.16\"", "not a canonical semver"),
            ("module: \"a.b/c\"\nsource: kind: \"zip\"", "source.kind must be"),
            ("module: \"a.b/c\"\ndeps: \"x.y/z\": v: \"v1.0.0\"", "must have a major version suffix"),
            ("module: \"a.b/c\"\ndeps: \"x.y/z@v1\": v: \"v2.0.0\"", "does not match its major"),
            ("module: \"a.b/c\"\ndeps: \"x.y/z@v1\": {}", "has no version"),
            ("module: \"a.b/c\"\ndeps: \"x.y/z@v1\": {v: \"v1.0.0\", default: 1}", "default must be a bool"),
            (
                "module: \"a.b/c\"\ndeps: \"x.y/z@v1\": {v: \"v1.0.0\", default: true}\ndeps: \"x.y/z@v2\": {v: \"v2.0.0\", default: true}",
                "multiple default major versions",
            ),
            ("module: \"a.b/c\"\nmodule: \"a.b/d\"", "conflicting values"),
            ("module: \"a.b/c\" +", "expected operand"),
            ("package x\nmodule: \"a.b/c\"", "package clause is not allowed"),
        ];
        for (src, want) in cases {
            let errs = parse(src).unwrap_err();
            assert!(
                errs.iter().any(|e| e.contains(want)),
                "{src:?}: want {want:?}, got {errs:?}"
            );
        }
    }
}
