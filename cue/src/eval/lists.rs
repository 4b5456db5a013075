//! List literals: elements, the open tail `...T`, and list closedness (CUE spec "Lists"; a
//! list with no tail is closed at its length, elements past a typed tail unify with it).
//!
//! A comprehension in a list yields one element per body; when one of its clauses fails (a
//! `for` over an error or a non-iterable value, an `if` whose condition is an error or no
//! bool) the list is that error (spec "Comprehensions"; upstream propagates the clause's error
//! to the enclosing value). A clause that is only incomplete (or selects a field that is not
//! there) yields no element yet and leaves the list incomplete: its export fails.

use super::*;

#[derive(Clone, Debug, Default)]
pub(super) struct ListState {
    pub(super) closed_len: Option<usize>,
    pub(super) min_len: usize,
    pub(super) tails: Vec<(usize, Conj)>,
}

impl Ev {
    pub(super) fn expand_list(&mut self, v: VId, c: &Conj, lit: &Arc<ListLit>) {
        self.vm(v).value.is_list = true;
        let child_close = self.child_close(c);
        let child_outer = self.child_outer(c);
        let mut idx = 0usize;
        for el in &lit.elems {
            match el {
                ListElemC::Expr(e) => {
                    let a = self.arc(v, &Label::index(idx));
                    self.vm(a).constraint = Some(FieldConstraint::Regular);
                    self.add_conj(
                        a,
                        Conj {
                            env: c.env.clone(),
                            expr: e.clone(),
                            close: child_close,
                            embed: None,
                            outer: child_outer.clone(),
                        },
                    );
                    idx += 1;
                }
                ListElemC::Comprehension(comp) => {
                    let env = match &c.env {
                        Some(e) => e.clone(),
                        None => self.new_env(None, v, EnvKind::Bind(Vec::new())),
                    };
                    let mut bodies = Vec::new();
                    match self.run_clauses(v, &env, comp, 0, &mut bodies) {
                        // A clause that fails (a source that is an error, a guard that is an
                        // error or not a bool) makes the list that error: it never stands for
                        // an empty list.
                        Some(b) if b.code.is_fatal() => {
                            self.set_err(v, b);
                            return;
                        }
                        // An incomplete clause yields nothing yet: the list is evaluated again
                        // where the value it waits for is known (`#T: {#p: string, l: [if
                        // f(#p) {...}]}` used as `#T & {#p: "x"}`); here it is incomplete, and
                        // an export of it fails (upstream `comprehensions/incomplete`: `[for x
                        // in src.foo {}]` is not `[]`), as for a struct's comprehension.
                        Some(b)
                            if matches!(b.code, ErrorCode::Incomplete | ErrorCode::Undefined) =>
                        {
                            self.set_err(v, b);
                            self.stuck_comprehensions.insert(v, ());
                        }
                        _ => {}
                    }
                    for benv in bodies {
                        // Past the memory budget the rest is not built.
                        if self.budget.limit_err.is_some() {
                            break;
                        }
                        let a = self.arc(v, &Label::index(idx));
                        self.vm(a).constraint = Some(FieldConstraint::Regular);
                        self.add_conj(
                            a,
                            Conj {
                                env: Some(benv),
                                expr: Expr::Struct(comp.body.clone()),
                                close: child_close,
                                embed: None,
                                outer: child_outer.clone(),
                            },
                        );
                        idx += 1;
                    }
                }
            }
        }
        let vert = self.vm(v);
        let st = vert.scr_mut().list.get_or_insert_with(ListState::default);
        match &lit.ellipsis {
            None => {
                if let Some(n) = st.closed_len {
                    if n != idx {
                        let b = Bottom::new(
                            ErrorCode::Eval,
                            format!("incompatible list lengths ({n} and {idx})"),
                            lit.span,
                        );
                        self.set_err(v, b);
                        return;
                    }
                }
                st.closed_len = Some(idx);
            }
            Some(t) => {
                st.min_len = st.min_len.max(idx);
                if let Some(t) = t {
                    st.tails.push((
                        idx,
                        Conj {
                            env: c.env.clone(),
                            expr: t.clone(),
                            close: child_close,
                            embed: None,
                            outer: child_outer.clone(),
                        },
                    ));
                }
            }
        }
    }
}
