//! Printing an evaluated value as CUE (what `cue eval` shows).
//!
//! Rules implemented (after upstream `cue eval`'s default output):
//! - Regular, required (`a!:`) and optional (`a?:`) fields and definitions are printed in
//!   field order; hidden fields are left out (upstream shows them only with `-H`), and so are
//!   pattern constraints and the closedness of structs, which this printer does not render.
//! - A concrete scalar prints as a literal (strings and bytes quoted so the text parses back);
//!   an incomplete one as its kind and bounds joined by `&` (`int & >=1`), validators included
//!   (`strings.MinRunes(3)`); `_` when nothing is known.
//! - A disjunction prints its alternatives joined by ` | `, defaults marked with `*`.
//! - An error prints as `_|_ // message`; a list with an open tail ends in `...`.
//! - Printing is depth-limited: below [`MAX_DEPTH`] levels a value prints as `...`; and
//!   size-limited: once the text holds `Config::max_output_bytes`, no further field or element
//!   is printed, only the brackets that close the open ones (a value that grows without end, `g: [h, h]`, `h: [g, g]`, would otherwise be walked
//!   7^200 times for seven elements per level).

use super::{ops, Ev};
use crate::adt::*;
use crate::ast::FieldConstraint;

/// Deepest nesting printed.
pub const MAX_DEPTH: usize = 200;

impl Ev {
    /// The value of `v` as CUE text (without a trailing newline).
    pub fn print_cue(&mut self, v: VId) -> String {
        let mut out = String::new();
        self.print_vertex(v, 0, &mut out);
        out
    }

    /// The fields of the struct `v` as CUE declarations, one per line (a file's top level).
    pub fn print_cue_file(&mut self, v: VId) -> String {
        self.eval(v);
        let d = self.deref(v);
        let vx = self.vx(d);
        if vx.err().is_none()
            && vx.disjunction.result.is_none()
            && vx.is_struct()
            && vx.scalar().is_none()
        {
            let mut out = String::new();
            self.print_fields(d, 0, &mut out);
            return out;
        }
        self.print_cue(v)
    }

    fn print_vertex(&mut self, v: VId, depth: usize, out: &mut String) {
        if depth > MAX_DEPTH || out.len() >= self.config.max_output_bytes {
            out.push_str("...");
            return;
        }
        self.eval(v);
        let v = self.deref_redirect(v);
        let vx = self.vx(v);
        if let Some(e) = vx.err() {
            out.push_str("_|_ // ");
            out.push_str(&e.msg.replace('\n', " "));
            return;
        }
        if let Some(d) = vx.disjunction.result.clone() {
            for (i, (a, mark)) in d.alts.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                if *mark && d.has_default {
                    out.push('*');
                }
                self.print_vertex(*a, depth + 1, out);
            }
            return;
        }
        if let Some(s) = vx.scalar() {
            out.push_str(&literal(s));
            return;
        }
        if vx.is_list() {
            let arcs = vx.elements();
            let open = vx
                .scr()
                .list
                .as_ref()
                .is_some_and(|l| l.closed_len.is_none());
            let tails: Vec<_> = vx
                .scr()
                .list
                .as_ref()
                .map(|l| l.tails.iter().map(|(_, c)| c.clone()).collect())
                .unwrap_or_default();
            // The type of further elements: the list's tails as written, or else unified.
            let mut tail = String::from("...");
            if let Some(t) = conjuncts_text(&tails) {
                tail.push_str(&t);
            } else if open && !tails.is_empty() {
                let t = self.anon(None, Expr::Lit(Val::Top, tails[0].expr.span()));
                for c in tails {
                    self.add_conj(t, c);
                }
                let mut ty = String::new();
                self.print_vertex(t, if arcs.is_empty() { depth } else { depth + 1 }, &mut ty);
                if ty != "_" {
                    tail.push_str(&ty);
                }
            }
            if arcs.is_empty() {
                out.push_str(&if open {
                    format!("[{tail}]")
                } else {
                    "[]".into()
                });
                return;
            }
            out.push_str("[\n");
            for a in arcs {
                if out.len() >= self.config.max_output_bytes {
                    break;
                }
                indent(out, depth + 1);
                self.print_vertex(a, depth + 1, out);
                out.push_str(",\n");
            }
            if open {
                indent(out, depth + 1);
                out.push_str(&tail);
                out.push('\n');
            }
            indent(out, depth);
            out.push(']');
            return;
        }
        if vx.is_struct() {
            let shown = vx.arcs().any(|(l, _)| shown(l));
            if !shown {
                out.push_str("{}");
                return;
            }
            out.push_str("{\n");
            self.print_fields(v, depth + 1, out);
            indent(out, depth);
            out.push('}');
            return;
        }
        out.push_str(&incomplete_scalar(vx.value.kinds, &vx.value.bounds));
    }

    fn print_fields(&mut self, v: VId, depth: usize, out: &mut String) {
        let arcs: Vec<(Label, VId)> = self
            .vx(v)
            .arcs()
            .filter(|(l, _)| shown(l))
            .map(|(l, a)| (l.clone(), a))
            .collect();
        for (l, a) in arcs {
            if out.len() >= self.config.max_output_bytes {
                break;
            }
            indent(out, depth);
            out.push_str(&l.path_text());
            match self.vx(a).constraint() {
                Some(FieldConstraint::Optional) => out.push('?'),
                Some(FieldConstraint::Required) => out.push('!'),
                _ => {}
            }
            out.push_str(": ");
            // An optional field is printed as written when that is a reference or a simple
            // expression: evaluating it would unfold recursive schemas without end.
            let written = match self.vx(a).constraint() {
                Some(FieldConstraint::Optional) => conjuncts_text(&self.vx(a).conjuncts.clone()),
                _ => None,
            };
            match written {
                Some(t) => out.push_str(&t),
                None => self.print_vertex(a, depth, out),
            }
            out.push('\n');
        }
    }
}

/// The conjuncts as CUE text joined by `&`, if each is a simple expression and one of them
/// refers to something (a plain literal is better shown evaluated).
fn conjuncts_text(cs: &[super::Conj]) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut refers = false;
    for c in cs {
        refers |= has_ref(&c.expr);
        let t = expr_text(&c.expr)?;
        if !parts.contains(&t) {
            parts.push(t);
        }
    }
    (refers && !parts.is_empty()).then(|| parts.join(" & "))
}

fn has_ref(e: &Expr) -> bool {
    match e {
        Expr::FieldRef { .. }
        | Expr::SelfRef { .. }
        | Expr::LetRef { .. }
        | Expr::Selector(..)
        | Expr::Import(..)
        | Expr::PkgMember(..) => true,
        Expr::Disj(xs, _) => xs.iter().any(|(x, _)| has_ref(x)),
        Expr::Unify(xs, _) => xs.iter().any(has_ref),
        Expr::List(l) => l
            .ellipsis
            .as_ref()
            .and_then(|e| e.as_ref())
            .is_some_and(has_ref),
        _ => false,
    }
}

/// A simple expression as CUE text: references, selectors, literals, kinds and bounds, and
/// disjunctions, conjunctions and lists of those. `None` for anything else.
fn expr_text(e: &Expr) -> Option<String> {
    Some(match e {
        Expr::Lit(v, _) if !matches!(v, Val::Vertex(_) | Val::Bottom(_)) => literal(v),
        Expr::FieldRef { label, .. } => label.path_text(),
        Expr::LetRef { name, .. } => name.to_string(),
        Expr::Selector(x, l, _) => format!("{}.{}", expr_text(x)?, l.path_text()),
        Expr::Import(p, _) => p.rsplit('/').next().unwrap_or(p).to_string(),
        Expr::PkgMember(p, n, _) => format!("{}.{n}", p.rsplit('/').next().unwrap_or(p)),
        Expr::Disj(xs, _) => xs
            .iter()
            .map(|(x, d)| expr_text(x).map(|t| if *d { format!("*{t}") } else { t }))
            .collect::<Option<Vec<_>>>()?
            .join(" | "),
        Expr::Unify(xs, _) => xs
            .iter()
            .map(|x| {
                expr_text(x).map(|t| {
                    if matches!(x, Expr::Disj(..)) {
                        format!("({t})")
                    } else {
                        t
                    }
                })
            })
            .collect::<Option<Vec<_>>>()?
            .join(" & "),
        Expr::List(l) => {
            let mut parts = Vec::new();
            for el in &l.elems {
                match el {
                    ListElemC::Expr(x) => parts.push(expr_text(x)?),
                    ListElemC::Comprehension(_) => return None,
                }
            }
            match &l.ellipsis {
                Some(Some(t)) => parts.push(format!("...{}", expr_text(t)?)),
                Some(None) => parts.push("...".into()),
                None => {}
            }
            format!("[{}]", parts.join(", "))
        }
        _ => return None,
    })
}

/// Fields `cue eval` shows by default: regular fields and definitions.
fn shown(l: &Label) -> bool {
    matches!(l.kind, LabelKind::Regular | LabelKind::Def)
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("    ");
    }
}

/// A concrete scalar as a CUE literal.
fn literal(v: &Val) -> String {
    match v {
        Val::Str(s) => serde_json::to_string(&**s).unwrap_or_else(|_| "\"\"".into()),
        Val::Bytes(b) => {
            let mut s = String::from("'");
            for &c in b.iter() {
                match c {
                    b'\'' => s.push_str("\\'"),
                    b'\\' => s.push_str("\\\\"),
                    b'\n' => s.push_str("\\n"),
                    0x20..=0x7e => s.push(c as char),
                    _ => s.push_str(&format!("\\x{c:02x}")),
                }
            }
            s.push('\'');
            s
        }
        Val::Bound(op, x) => format!("{}{}", op.text(), literal(x)),
        Val::Validator(x) => validator(x),
        other => ops::show(other),
    }
}

fn validator(v: &Validator) -> String {
    let list = |xs: &[Val]| xs.iter().map(literal).collect::<Vec<_>>().join(", ");
    match v {
        Validator::Builtin(b, args) => format!("{}.{}({})", b.pkg, b.name, list(args)),
        Validator::MatchN(n, xs, _) => format!("matchN({}, [{}])", literal(n), list(xs)),
        Validator::MatchIf(a, b, c, _) => {
            format!("matchIf({}, {}, {})", literal(a), literal(b), literal(c))
        }
    }
}

/// A non-concrete scalar: its kind and constraints (`int & >=1`), `_` for top.
fn incomplete_scalar(kinds: Kinds, bounds: &[Val]) -> String {
    let mut parts: Vec<String> = Vec::new();
    // A bound implies its kind (`>=1` is a number): print the kind only when it narrows that.
    let implied = bounds.iter().fold(K_TOP, |k, b| k & b.kind());
    if kinds != K_TOP && (bounds.is_empty() || kinds != implied) {
        parts.push(kind_name(kinds));
    }
    parts.extend(bounds.iter().map(literal));
    if parts.is_empty() {
        "_".into()
    } else {
        parts.join(" & ")
    }
}
