//! Compilation from the AST to the internal representation (upstream `internal/core/compile`).
//!
//! Rules implemented (spec "Declarations and scopes", "References"):
//! - Every struct literal opens one scope holding its identifier-like labels, its `let`s and its
//!   aliases; a comprehension `for` or `let` clause and a pattern constraint open a binding scope.
//!   The evaluator creates exactly one environment per scope, so a reference is compiled to
//!   "go up N environments, then take field/let/binding X".
//! - A value alias of a struct literal (`a: X={...}`) names, inside the literal, the struct
//!   itself as unified where the literal is processed ("go up N environments, take the
//!   environment's struct": `#O: X={s: _, o: X.s}` used as `#O & {s: 1}` reads `s: 1`, not
//!   `#O.s`); outside the literal it names the field `a`, like a label alias.
//! - The package scope is shared by all files of a package; `let`s and imports are per file.
//! - Unresolved identifiers fall back to imports, then to predeclared identifiers (`int`, `len`,
//!   ...); anything else is a compile error value ("reference not found").
//! - `a & b & c` and `a | *b | c` are flattened.

use crate::adt::{
    Bottom, BoundOp, ClauseC, ComprehensionC, ErrorCode, Expr, FieldDecl, InterpPart, Label,
    LabelExpr, ListElemC, ListLit, PatternDecl, StructLit, Val, K_BOOL, K_BYTES, K_FLOAT, K_INT,
    K_NUMBER, K_STRING,
};
use crate::ast;
use crate::source::Span;
use crate::textmap::{TextMap, TextSet};
use num_bigint::BigInt;
use std::sync::Arc;

enum Scope {
    Struct {
        fields: TextMap<String, Label>,
        lets: TextMap<String, u32>,
        /// The value alias of this struct literal (`a: X={...}`), naming the struct itself
        /// inside it.
        self_alias: Option<String>,
        /// The `let`s and aliases declared in this scope, with whether a reference used them:
        /// an unused one is a compile error.
        aliases: TextMap<String, AliasUse>,
        /// Label aliases of dynamic fields: the index of the let holding the label expression.
        dyn_aliases: TextMap<String, u32>,
    },
    Bind(TextMap<String, u32>),
}

/// The source of a struct scope's let: an expression, or an interpolated label.
enum LetSrc<'a> {
    Expr(&'a ast::Expr),
    Interp(&'a [ast::StrPart], Span),
}

/// A `let` or alias declared in a struct scope: where, and whether a reference used it.
struct AliasUse {
    span: Span,
    used: bool,
}

/// Compiles the files of one package into one struct literal per file.
pub struct Compiler {
    scopes: Vec<Scope>,
    imports: TextMap<String, String>,
    used_imports: TextSet<String>,
    /// Errors found (also embedded as `Expr::Bad`).
    pub errors: Vec<Arc<Bottom>>,
    /// Errors that make the package invalid (imported and not used).
    pub fatal: Vec<Arc<Bottom>>,
    /// The package's hidden-field scope: hidden labels (`_x`, `_#x`) of different packages are
    /// different labels even when spelled alike (0 is the main package).
    pub hidden_scope: usize,
    /// Import path as written → the key the loaded instance is registered under; paths not listed
    /// keep their own key (std packages, or builds without a loader).
    pub import_keys: TextMap<String, String>,
    /// Compiling an expression in the scope of a package value (`cue export -e`): an identifier
    /// no scope declares names a field of that value (it may come from an embedding), looked up
    /// when evaluated.
    value_scope: bool,
    /// The value alias of the field whose struct literal is compiled next (see
    /// `Scope::Struct::self_alias`).
    pending_self_alias: Option<ast::Ident>,
}

/// The local name an import path binds by default (`encoding/json` → `json`, `a/b@v1:c` → `c`).
pub fn import_name(path: &str) -> String {
    if let Some((_, q)) = path.rsplit_once(':') {
        return q.to_string();
    }
    let last = path.rsplit('/').next().unwrap_or(path);
    last.split('@').next().unwrap_or(last).to_string()
}

/// The key a package is registered under: the path without `@version`, with its qualifier.
pub fn import_key(path: &str) -> String {
    let (p, q) = match path.split_once(':') {
        Some((a, b)) => (a, Some(b)),
        None => (path, None),
    };
    let p = p.split('@').next().unwrap_or(p);
    match q {
        Some(q) => format!("{p}:{q}"),
        None => p.to_string(),
    }
}

/// Strips a `:qualifier` and `@version` from an import path.
pub fn import_base(path: &str) -> String {
    let p = path.split(':').next().unwrap_or(path);
    match p.rsplit_once('@') {
        Some((a, _)) => a.to_string(),
        None => p.to_string(),
    }
}

fn label_name_of(label: &ast::Label) -> Option<(String, bool)> {
    match label {
        ast::Label::Ident(i) => Some((i.name.clone(), true)),
        ast::Label::String { parts, .. } => {
            if parts.len() == 1 {
                if let ast::StrPart::Text(t) = &parts[0] {
                    return Some((t.clone(), false));
                }
            }
            if parts.is_empty() {
                return Some((String::new(), false));
            }
            None
        }
        _ => None,
    }
}

fn fixed_label(name: &str, is_ident: bool, scope: usize) -> Label {
    if is_ident {
        scoped(Label::ident(name), scope)
    } else {
        Label::string(name)
    }
}

/// Puts a hidden label into package scope `scope` (its `index`, unused for field labels).
pub fn scoped(mut l: Label, scope: usize) -> Label {
    if l.is_hidden() {
        l.index = u32::try_from(scope).unwrap_or(u32::MAX);
    }
    l
}

/// Predeclared identifiers.
pub fn predeclared(name: &str, span: Span) -> Option<Expr> {
    let lit = |v: Val| Some(Expr::Lit(v, span));
    let bounded = |lo: BigInt, hi: BigInt| {
        Some(Expr::Unify(
            vec![
                Expr::Lit(Val::Kind(K_INT), span),
                Expr::Lit(Val::Bound(BoundOp::Ge, Arc::new(Val::int(lo))), span),
                Expr::Lit(Val::Bound(BoundOp::Le, Arc::new(Val::int(hi))), span),
            ]
            .into(),
            span,
        ))
    };
    let p2 = |n: u32| BigInt::from(2).pow(n);
    match name {
        "bool" => lit(Val::Kind(K_BOOL)),
        "int" => lit(Val::Kind(K_INT)),
        "float" => lit(Val::Kind(K_FLOAT)),
        "number" => lit(Val::Kind(K_NUMBER)),
        "string" => lit(Val::Kind(K_STRING)),
        "bytes" => lit(Val::Kind(K_BYTES)),
        "null" => lit(Val::Null),
        "__no_sharing" => lit(Val::Top),
        "_" => lit(Val::Top),
        "uint" => Some(Expr::Unify(
            vec![
                Expr::Lit(Val::Kind(K_INT), span),
                Expr::Lit(Val::Bound(BoundOp::Ge, Arc::new(Val::int(0))), span),
            ]
            .into(),
            span,
        )),
        "int8" => bounded(-p2(7), p2(7) - 1),
        "int16" => bounded(-p2(15), p2(15) - 1),
        "int32" => bounded(-p2(31), p2(31) - 1),
        "int64" => bounded(-p2(63), p2(63) - 1),
        "int128" => bounded(-p2(127), p2(127) - 1),
        "uint8" | "byte" => bounded(BigInt::from(0), p2(8) - 1),
        "uint16" => bounded(BigInt::from(0), p2(16) - 1),
        "uint32" => bounded(BigInt::from(0), p2(32) - 1),
        "uint64" => bounded(BigInt::from(0), p2(64) - 1),
        "uint128" => bounded(BigInt::from(0), p2(128) - 1),
        "rune" => bounded(BigInt::from(0), BigInt::from(0x10FFFF)),
        "float32" | "float64" => {
            let m: bigdecimal::BigDecimal = if name == "float32" {
                "3.40282346638528859811704183484516925440e+38"
                    .parse()
                    .ok()?
            } else {
                "1.797693134862315708145274237317043567981e+308"
                    .parse()
                    .ok()?
            };
            Some(Expr::Unify(
                vec![
                    Expr::Lit(Val::Kind(K_NUMBER), span),
                    Expr::Lit(
                        Val::Bound(BoundOp::Ge, Arc::new(Val::Float(Arc::new(-m.clone())))),
                        span,
                    ),
                    Expr::Lit(
                        Val::Bound(BoundOp::Le, Arc::new(Val::Float(Arc::new(m)))),
                        span,
                    ),
                ]
                .into(),
                span,
            ))
        }
        "len" | "close" | "and" | "or" | "div" | "mod" | "quo" | "rem" | "matchN" | "matchIf"
        | "error" | "__and" | "__or" => lit(Val::Builtin(name.into())),
        _ => None,
    }
}

impl Compiler {
    /// A compiler for one package.
    pub fn new() -> Self {
        Compiler {
            scopes: Vec::new(),
            imports: TextMap::default(),
            used_imports: TextSet::default(),
            errors: Vec::new(),
            fatal: Vec::new(),
            hidden_scope: 0,
            import_keys: TextMap::default(),
            value_scope: false,
            pending_self_alias: None,
        }
    }

    /// The import expression for an import path as written.
    fn import_expr(&self, path: &str, span: Span) -> Expr {
        let key = self.import_keys.get(path).map_or(path, |k| k.as_str());
        Expr::Import(key.into(), span)
    }

    /// Compiles the files of a package. Returns one struct literal per file (all conjuncts of the
    /// package root) and the import paths used.
    pub fn compile_package(&mut self, files: &[&ast::File]) -> Vec<Arc<StructLit>> {
        let mut pkg_fields = TextMap::default();
        for f in files {
            for d in &f.decls {
                collect_field_name(d, &mut pkg_fields, self.hidden_scope);
            }
        }
        let mut out = Vec::new();
        for f in files {
            self.imports.clear();
            for imp in &f.imports {
                let name = match &imp.alias {
                    Some(a) => a.name.clone(),
                    None => import_name(&imp.path),
                };
                self.imports.insert(name, imp.path.clone());
            }
            self.scopes.clear();
            self.used_imports.clear();
            let mut lit = self.struct_decls(&f.decls, f.span, Some(pkg_fields.clone()));
            lit.is_file = true;
            for imp in &f.imports {
                let name = match &imp.alias {
                    Some(a) => a.name.clone(),
                    None => import_name(&imp.path),
                };
                if name != "_" && !self.used_imports.contains(&name) {
                    self.fatal.push(Bottom::new(
                        ErrorCode::Eval,
                        format!("imported and not used: {:?}", imp.path),
                        imp.span,
                    ));
                }
            }
            out.push(Arc::new(lit));
        }
        out
    }

    /// Compiles a stand-alone expression in the scope of a package (for `-e`).
    pub fn compile_expr_in_package(&mut self, files: &[&ast::File], e: &ast::Expr) -> Expr {
        let mut pkg_fields = TextMap::default();
        for f in files {
            for d in &f.decls {
                collect_field_name(d, &mut pkg_fields, self.hidden_scope);
            }
        }
        self.imports.clear();
        for f in files {
            for imp in &f.imports {
                let name = match &imp.alias {
                    Some(a) => a.name.clone(),
                    None => import_name(&imp.path),
                };
                self.imports.insert(name, imp.path.clone());
            }
        }
        self.scopes = vec![Scope::Struct {
            fields: pkg_fields,
            lets: TextMap::default(),
            self_alias: None,
            aliases: TextMap::default(),
            dyn_aliases: TextMap::default(),
        }];
        self.value_scope = true;
        let r = self.expr(e);
        self.value_scope = false;
        self.scopes.clear();
        r
    }

    fn struct_decls(
        &mut self,
        decls: &[ast::Decl],
        span: Span,
        fields_override: Option<TextMap<String, Label>>,
    ) -> StructLit {
        let self_alias_id = self.pending_self_alias.take();
        let self_alias = self_alias_id.as_ref().map(|a| a.name.clone());
        let mut fields = TextMap::default();
        match fields_override {
            Some(f) => fields = f,
            None => {
                for d in decls {
                    collect_field_name(d, &mut fields, self.hidden_scope);
                }
            }
        }
        let mut lets = TextMap::default();
        let mut let_list: Vec<(&str, LetSrc)> = Vec::new();
        let mut dyn_aliases = TextMap::default();
        let mut aliases = TextMap::default();
        if let Some(a) = &self_alias_id {
            aliases.insert(
                a.name.clone(),
                AliasUse {
                    span: a.span,
                    used: false,
                },
            );
        }
        for d in decls {
            if let ast::Decl::Let(l) = d {
                self.declare_alias(&mut aliases, &l.name);
                lets.insert(l.name.name.clone(), let_list.len() as u32);
                let_list.push((l.name.name.as_str(), LetSrc::Expr(&l.expr)));
            }
            if let ast::Decl::Field(f) = d {
                // A label alias names the field itself in the enclosing struct; a value alias
                // (`a: X=v`) is visible only inside `v` (see `field`).
                if let Some((name, is_ident)) = label_name_of(&f.label) {
                    let lab = fixed_label(&name, is_ident, self.hidden_scope);
                    if let Some(a) = &f.label_alias {
                        self.declare_alias(&mut aliases, a);
                        fields.insert(a.name.clone(), lab);
                    }
                } else if !matches!(f.label, ast::Label::Pattern { .. }) {
                    // A dynamic field's label is known only at evaluation time: its label alias
                    // (`X=(k): v`, `X="\(k)": v`) names the field of this struct whose label the
                    // label expression gives (a hidden let holds that expression), with every
                    // conjunct the field gets; a value alias is bound to the field's own value,
                    // like a `let`.
                    if let Some(a) = &f.label_alias {
                        let src = match &f.label {
                            ast::Label::Dynamic { expr, .. } => Some(LetSrc::Expr(expr)),
                            ast::Label::String { parts, span } => {
                                Some(LetSrc::Interp(parts, *span))
                            }
                            _ => None,
                        };
                        if let Some(src) = src {
                            self.declare_alias(&mut aliases, a);
                            dyn_aliases.insert(a.name.clone(), let_list.len() as u32);
                            let_list.push((a.name.as_str(), src));
                        }
                    }
                    if let Some(a) = &f.value_alias {
                        self.declare_alias(&mut aliases, a);
                        lets.insert(a.name.clone(), let_list.len() as u32);
                        let_list.push((a.name.as_str(), LetSrc::Expr(&f.value)));
                    }
                }
            }
        }
        self.scopes.push(Scope::Struct {
            fields,
            lets,
            self_alias,
            aliases,
            dyn_aliases,
        });
        let mut lit = StructLit {
            span,
            ..Default::default()
        };
        for (name, src) in &let_list {
            let e = match src {
                LetSrc::Expr(e) => self.expr(e),
                LetSrc::Interp(parts, span) => self.interp(parts, false, *span),
            };
            lit.lets.push((Arc::from(*name), e));
        }
        for d in decls {
            match d {
                ast::Decl::Field(f) => self.field(f, &mut lit),
                ast::Decl::Embed(e) => {
                    let e = self.expr(e);
                    lit.embeds.push(e);
                }
                ast::Decl::Let(_) => {}
                ast::Decl::Ellipsis { expr, .. } => {
                    lit.ellipsis = Some(expr.as_ref().map(|e| self.expr(e)));
                }
                ast::Decl::Comprehension(c) => {
                    let c = self.comprehension(c);
                    lit.comprehensions.push(c);
                }
                ast::Decl::Attribute(_) => {}
                ast::Decl::Bad(s) => {
                    let b = Bottom::new(ErrorCode::Eval, "syntax error", *s);
                    self.errors.push(b.clone());
                    lit.embeds.push(Expr::Bad(b));
                }
            }
        }
        if let Some(Scope::Struct { aliases, .. }) = self.scopes.pop() {
            self.report_unused(aliases);
        }
        lit
    }

    /// Records a `let` or alias declared in a struct scope; a name declared twice in one scope
    /// is a compile error (spec "Aliases", "Let declarations": the name must be unique within
    /// its scope).
    fn declare_alias(&mut self, aliases: &mut TextMap<String, AliasUse>, id: &ast::Ident) {
        if aliases.contains_key(&id.name) {
            self.fatal.push(Bottom::new(
                ErrorCode::Eval,
                format!("alias {:?} redeclared in same scope", id.name),
                id.span,
            ));
            return;
        }
        aliases.insert(
            id.name.clone(),
            AliasUse {
                span: id.span,
                used: false,
            },
        );
    }

    /// An alias or `let` that no reference uses is a compile error (upstream
    /// `internal/core/compile`: "unreferenced alias or let clause").
    fn report_unused(&mut self, aliases: TextMap<String, AliasUse>) {
        let mut unused: Vec<_> = aliases.into_iter().filter(|(_, a)| !a.used).collect();
        unused.sort_by_key(|(_, a)| (a.span.start, a.span.end));
        for (name, a) in unused {
            self.fatal.push(Bottom::new(
                ErrorCode::Eval,
                format!("unreferenced alias or let clause {name}"),
                a.span,
            ));
        }
    }

    fn field(&mut self, f: &ast::Field, lit: &mut StructLit) {
        // `a: X={...}`: inside the literal, `X` is the struct itself as unified where the
        // literal is processed (`#O: X={s: _, o: X.s}` used as `#O & {s: 1}` reads `s: 1`);
        // outside it, `X` names the field as before.
        // `a: X=v` with `v` not a struct literal: `X` names the field, visible only inside `v`.
        let value_alias = match (&f.value_alias, &f.value, &f.label) {
            (Some(a), v, ast::Label::Ident(_) | ast::Label::String { .. })
                if !matches!(v, ast::Expr::Struct(_)) =>
            {
                label_name_of(&f.label).map(|(name, is_ident)| {
                    (a.clone(), fixed_label(&name, is_ident, self.hidden_scope))
                })
            }
            _ => None,
        };
        if let Some((a, lab)) = &value_alias {
            if let Some(Scope::Struct {
                fields, aliases, ..
            }) = self.scopes.last_mut()
            {
                let saved = fields.insert(a.name.clone(), lab.clone());
                let saved_use = aliases.insert(
                    a.name.clone(),
                    AliasUse {
                        span: a.span,
                        used: false,
                    },
                );
                self.field_value_in_alias_scope(f, lit);
                if let Some(Scope::Struct {
                    fields, aliases, ..
                }) = self.scopes.last_mut()
                {
                    match saved {
                        Some(l) => fields.insert(a.name.clone(), l),
                        None => fields.remove(&a.name),
                    };
                    let used = match saved_use {
                        Some(u) => aliases.insert(a.name.clone(), u),
                        None => aliases.remove(&a.name),
                    }
                    .is_some_and(|u| u.used);
                    if !used {
                        let mut m = TextMap::default();
                        m.insert(
                            a.name.clone(),
                            AliasUse {
                                span: a.span,
                                used: false,
                            },
                        );
                        self.report_unused(m);
                    }
                }
                return;
            }
        }
        self.field_value_in_alias_scope(f, lit);
    }

    /// Compiles field `f` into `lit` (its value alias, if any, already in scope).
    fn field_value_in_alias_scope(&mut self, f: &ast::Field, lit: &mut StructLit) {
        let self_alias = match (&f.value_alias, &f.value) {
            (Some(a), ast::Expr::Struct(_)) => Some(a.clone()),
            _ => None,
        };
        match &f.label {
            ast::Label::Pattern { alias, expr, .. } => {
                let filter = self.expr(expr);
                let mut names = TextMap::default();
                if let Some(a) = alias {
                    names.insert(a.name.clone(), 0);
                }
                // `[string]: X={...}` and `X=[string]: ...`: the alias names the matched field
                // (binding 1) within the pattern's value (spec "Aliases").
                for a in [&f.value_alias, &f.label_alias].into_iter().flatten() {
                    names.insert(a.name.clone(), 1);
                }
                self.scopes.push(Scope::Bind(names));
                let value = self.expr(&f.value);
                self.scopes.pop();
                lit.patterns.push(PatternDecl { filter, value });
            }
            ast::Label::Dynamic { expr, .. } => {
                let l = self.expr(expr);
                let value = self.expr(&f.value);
                lit.fields.push(FieldDecl {
                    label: LabelExpr::Dynamic(l),
                    constraint: f.constraint,
                    value,
                    span: f.span,
                });
            }
            ast::Label::String { parts, span } => {
                let label = match label_name_of(&f.label) {
                    Some((name, _)) => LabelExpr::Fixed(Label::string(&name)),
                    None => LabelExpr::Dynamic(self.interp(parts, false, *span)),
                };
                self.pending_self_alias = self_alias;
                let value = self.expr(&f.value);
                lit.fields.push(FieldDecl {
                    label,
                    constraint: f.constraint,
                    value,
                    span: f.span,
                });
            }
            ast::Label::Ident(i) => {
                self.pending_self_alias = self_alias;
                let value = self.expr(&f.value);
                lit.fields.push(FieldDecl {
                    label: LabelExpr::Fixed(scoped(Label::ident(&i.name), self.hidden_scope)),
                    constraint: f.constraint,
                    value,
                    span: f.span,
                });
            }
        }
    }

    fn comprehension(&mut self, c: &ast::Comprehension) -> ComprehensionC {
        let mut pushed = 0;
        let mut clauses = Vec::new();
        for cl in &c.clauses {
            match cl {
                ast::Clause::For {
                    key,
                    value,
                    source,
                    span,
                } => {
                    let source = self.expr(source);
                    let mut names = TextMap::default();
                    if let Some(k) = key {
                        names.insert(k.name.clone(), 0);
                    }
                    names.insert(value.name.clone(), 1);
                    self.scopes.push(Scope::Bind(names));
                    pushed += 1;
                    clauses.push(ClauseC::For {
                        source,
                        span: *span,
                    });
                }
                ast::Clause::If { cond, span } => {
                    let cond = self.expr(cond);
                    clauses.push(ClauseC::If { cond, span: *span });
                }
                ast::Clause::Let(l) => {
                    let expr = self.expr(&l.expr);
                    let mut names = TextMap::default();
                    names.insert(l.name.name.clone(), 0);
                    self.scopes.push(Scope::Bind(names));
                    pushed += 1;
                    clauses.push(ClauseC::Let { expr });
                }
            }
        }
        let body = self.struct_decls(&c.body.decls, c.body.span, None);
        for _ in 0..pushed {
            self.scopes.pop();
        }
        ComprehensionC {
            clauses,
            body: Arc::new(body),
        }
    }

    fn resolve(&mut self, name: &str, span: Span) -> Expr {
        let n = self.scopes.len();
        for depth in 0..n {
            let up = depth as u32;
            let found = match &self.scopes[n - 1 - depth] {
                Scope::Struct {
                    fields,
                    lets,
                    self_alias,
                    dyn_aliases,
                    ..
                } => {
                    if self_alias.as_deref() == Some(name) {
                        Some(Expr::SelfRef { up, span })
                    } else if let Some(idx) = dyn_aliases.get(name) {
                        // The struct's field whose label the (let-held) label expression gives.
                        Some(Expr::Index(
                            Arc::new(Expr::SelfRef { up, span }),
                            Arc::new(Expr::LetRef {
                                up,
                                idx: *idx,
                                name: name.into(),
                                span,
                            }),
                            span,
                        ))
                    } else if let Some(idx) = lets.get(name) {
                        Some(Expr::LetRef {
                            up,
                            idx: *idx,
                            name: name.into(),
                            span,
                        })
                    } else if depth + 1 == n && self.imports.contains_key(name) {
                        // Imports shadow package fields in the file scope.
                        None
                    } else {
                        fields.get(name).map(|l| Expr::FieldRef {
                            up,
                            label: l.clone(),
                            span,
                        })
                    }
                }
                Scope::Bind(names) => names.get(name).map(|idx| Expr::BindRef {
                    up,
                    idx: *idx,
                    span,
                }),
            };
            if let Some(e) = found {
                if let Some(Scope::Struct { aliases, .. }) = self.scopes.get_mut(n - 1 - depth) {
                    if let Some(a) = aliases.get_mut(name) {
                        a.used = true;
                    }
                }
                return e;
            }
        }
        if let Some(path) = self.imports.get(name) {
            self.used_imports.insert(name.to_string());
            return self.import_expr(path, span);
        }
        if let Some(e) = predeclared(name, span) {
            return e;
        }
        if self.value_scope && !self.scopes.is_empty() {
            // The outermost scope is the package value: resolved by value when evaluated (the
            // evaluator looks a label its environment's literal lacks up in the vertex).
            return Expr::FieldRef {
                up: (self.scopes.len() - 1) as u32,
                label: fixed_label(name, true, self.hidden_scope),
                span,
            };
        }
        // An identifier no scope declares is a compile error of the whole package (upstream
        // `internal/core/compile`), even where nothing evaluates it (`x == _|_`, unused fields).
        let b = Bottom::new(
            ErrorCode::Eval,
            format!("reference {name:?} not found"),
            span,
        );
        self.errors.push(b.clone());
        self.fatal.push(b.clone());
        Expr::Bad(b)
    }

    fn interp(&mut self, parts: &[ast::StrPart], bytes: bool, span: Span) -> Expr {
        let mut out = Vec::new();
        for p in parts {
            match p {
                ast::StrPart::Text(t) => out.push(InterpPart::Text(t.clone())),
                ast::StrPart::Bytes(b) => out.push(InterpPart::Bytes(b.clone())),
                ast::StrPart::Interp(e) => {
                    let e = self.expr(e);
                    out.push(InterpPart::Expr(e));
                }
            }
        }
        Expr::Interp(out.into(), bytes, span)
    }

    fn flatten_unify(&mut self, e: &ast::Expr, out: &mut Vec<Expr>) {
        if let ast::Expr::Binary {
            op: ast::BinaryOp::Unification,
            lhs,
            rhs,
            ..
        } = e
        {
            self.flatten_unify(lhs, out);
            self.flatten_unify(rhs, out);
        } else {
            out.push(self.expr(e));
        }
    }

    fn flatten_disj(&mut self, e: &ast::Expr, out: &mut Vec<(Expr, bool)>) {
        match e {
            ast::Expr::Binary {
                op: ast::BinaryOp::Disjunction,
                lhs,
                rhs,
                ..
            } => {
                self.flatten_disj(lhs, out);
                self.flatten_disj(rhs, out);
            }
            ast::Expr::Unary {
                op: ast::UnaryOp::Default,
                expr,
                ..
            } => {
                let x = self.expr(expr);
                out.push((x, true));
            }
            _ => {
                let x = self.expr(e);
                out.push((x, false));
            }
        }
    }

    /// Compiles one expression in the current scopes.
    pub fn expr(&mut self, e: &ast::Expr) -> Expr {
        match e {
            ast::Expr::Top(s) => Expr::Lit(Val::Top, *s),
            ast::Expr::Bottom(s) => Expr::Lit(
                Val::Bottom(Bottom::new(
                    ErrorCode::User,
                    "explicit error (_|_ literal) in source",
                    *s,
                )),
                *s,
            ),
            ast::Expr::Null(s) => Expr::Lit(Val::Null, *s),
            ast::Expr::Bool(b, s) => Expr::Lit(Val::Bool(*b), *s),
            ast::Expr::Int(i, s) => Expr::Lit(Val::Int(Arc::new((**i).clone())), *s),
            ast::Expr::Float(f, s) => Expr::Lit(Val::Float(Arc::new((**f).clone())), *s),
            ast::Expr::Str { parts, bytes, span } => {
                let simple = parts.iter().all(|p| !matches!(p, ast::StrPart::Interp(_)));
                if simple {
                    if *bytes {
                        let mut b = Vec::new();
                        for p in parts {
                            match p {
                                ast::StrPart::Bytes(x) => b.extend_from_slice(x),
                                ast::StrPart::Text(t) => b.extend_from_slice(t.as_bytes()),
                                ast::StrPart::Interp(_) => {}
                            }
                        }
                        Expr::Lit(Val::Bytes(b.into()), *span)
                    } else {
                        let mut s = String::new();
                        for p in parts {
                            match p {
                                ast::StrPart::Text(t) => s.push_str(t),
                                ast::StrPart::Bytes(x) => s.push_str(&String::from_utf8_lossy(x)),
                                ast::StrPart::Interp(_) => {}
                            }
                        }
                        Expr::Lit(Val::Str(s.into()), *span)
                    }
                } else {
                    self.interp(parts, *bytes, *span)
                }
            }
            ast::Expr::Ident(i) => self.resolve(&i.name, i.span),
            ast::Expr::Struct(s) => {
                Expr::Struct(Arc::new(self.struct_decls(&s.decls, s.span, None)))
            }
            ast::Expr::List { elems, span } => {
                let mut lit = ListLit {
                    span: *span,
                    ..Default::default()
                };
                for el in elems {
                    match el {
                        ast::ListElem::Expr(e) => {
                            let e = self.expr(e);
                            lit.elems.push(ListElemC::Expr(e));
                        }
                        ast::ListElem::Ellipsis { expr, .. } => {
                            lit.ellipsis = Some(expr.as_ref().map(|e| self.expr(e)));
                        }
                        ast::ListElem::Comprehension(c) => {
                            let c = self.comprehension(c);
                            lit.elems.push(ListElemC::Comprehension(c));
                        }
                    }
                }
                Expr::List(Arc::new(lit))
            }
            ast::Expr::Selector { expr, sel, span } => {
                let base = self.expr(expr);
                if let Expr::Import(path, _) = &base {
                    let base_path = import_base(path);
                    if crate::builtins::is_std_package(&base_path) || is_known_std(&base_path) {
                        return Expr::PkgMember(
                            base_path.as_str().into(),
                            sel.name.as_str().into(),
                            *span,
                        );
                    }
                }
                Expr::Selector(
                    Arc::new(base),
                    scoped(Label::ident(&sel.name), self.hidden_scope),
                    *span,
                )
            }
            ast::Expr::Index { expr, index, span } => {
                let a = self.expr(expr);
                let b = self.expr(index);
                Expr::Index(Arc::new(a), Arc::new(b), *span)
            }
            ast::Expr::Slice { expr, lo, hi, span } => {
                let a = self.expr(expr);
                let lo = lo.as_ref().map(|x| Arc::new(self.expr(x)));
                let hi = hi.as_ref().map(|x| Arc::new(self.expr(x)));
                Expr::Slice(Arc::new(a), lo, hi, *span)
            }
            ast::Expr::Call { func, args, span } => {
                let f = self.expr(func);
                let args = args.iter().map(|a| self.expr(a)).collect();
                Expr::Call(Arc::new(f), args, *span)
            }
            ast::Expr::Unary { op, expr, span } => {
                if *op == ast::UnaryOp::Default {
                    let x = self.expr(expr);
                    return Expr::Disj(Arc::new([(x, true)]), *span);
                }
                let x = self.expr(expr);
                Expr::Unary(*op, Arc::new(x), *span)
            }
            ast::Expr::Binary { op, lhs, rhs, span } => match op {
                ast::BinaryOp::Unification => {
                    let mut v = Vec::new();
                    self.flatten_unify(e, &mut v);
                    Expr::Unify(v.into(), *span)
                }
                ast::BinaryOp::Disjunction => {
                    let mut v = Vec::new();
                    self.flatten_disj(e, &mut v);
                    Expr::Disj(v.into(), *span)
                }
                _ => {
                    let a = self.expr(lhs);
                    let b = self.expr(rhs);
                    Expr::Binary(*op, Arc::new(a), Arc::new(b), *span)
                }
            },
            ast::Expr::Paren(x, _) => self.expr(x),
            ast::Expr::Bad(s) => {
                let b = Bottom::new(ErrorCode::Eval, "syntax error", *s);
                self.errors.push(b.clone());
                Expr::Bad(b)
            }
        }
    }
}

impl Default for Compiler {
    fn default() -> Self {
        Compiler::new()
    }
}

/// Std packages known by name even when the builtins track has not provided them yet.
fn is_known_std(p: &str) -> bool {
    !p.contains('.') && !p.starts_with('/')
}

/// Adds the field `d` declares to the scope, if it can be referred to: only a field whose label
/// is an identifier can (spec: a quoted label `"s": s` declares no identifier, so that `s` is the
/// enclosing one; aliases name quoted fields).
fn collect_field_name(d: &ast::Decl, out: &mut TextMap<String, Label>, scope: usize) {
    if let ast::Decl::Field(f) = d {
        if let Some((name, true)) = label_name_of(&f.label) {
            out.insert(name.clone(), fixed_label(&name, true, scope));
        }
    }
}
