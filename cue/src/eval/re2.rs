//! Regular expressions of the match operators and bounds (`=~`, `!~`; spec "Comparison
//! operators"): RE2 syntax run on the `regex` crate. RE2's Perl classes (`\d`, `\w`, `\s`)
//! are ASCII where the crate's are Unicode, so they are translated to their ASCII forms; each
//! pattern is compiled once per evaluator.

use super::*;

impl Ev {
    /// Compiles (with caching) a regular expression with RE2 semantics.
    pub fn regex(&mut self, re: &str) -> Result<Arc<regex::Regex>, String> {
        if let Some(r) = self.caches.regexes.get(re) {
            return r.clone();
        }
        let tr = translate_re2(re);
        let r = regex::Regex::new(&tr)
            .map(Arc::new)
            .map_err(|e| format!("invalid regular expression {re:?}: {e}"));
        self.caches.regexes.insert(re.to_string(), r.clone());
        r
    }
}

/// Translates an RE2 pattern for the `regex` crate: Perl classes become ASCII classes.
pub fn translate_re2(re: &str) -> String {
    let mut out = String::with_capacity(re.len() + 8);
    let mut chars = re.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(n) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let rep = match n {
                    'd' => Some(("[0-9]", "0-9")),
                    'D' => Some(("[^0-9]", "\\x00-/:-\\x{10FFFF}")),
                    'w' => Some(("[0-9A-Za-z_]", "0-9A-Za-z_")),
                    'W' => Some(("[^0-9A-Za-z_]", "\\x00-/:-@\\[-^`{-\\x{10FFFF}")),
                    's' => Some(("[\\t\\n\\f\\r ]", "\\t\\n\\f\\r ")),
                    'S' => Some((
                        "[^\\t\\n\\f\\r ]",
                        "\\x00-\\x08\\x0B\\x0E-\\x1F!-\\x{10FFFF}",
                    )),
                    _ => None,
                };
                match rep {
                    Some((outside, inside)) => {
                        out.push_str(if in_class { inside } else { outside })
                    }
                    None => match n {
                        'b' if !in_class => out.push_str("(?-u:\\b)"),
                        'B' if !in_class => out.push_str("(?-u:\\B)"),
                        'z' => out.push_str("\\z"),
                        _ => {
                            out.push('\\');
                            out.push(n);
                        }
                    },
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
                // A POSIX class like [[:alpha:]] is kept as is.
            }
            '[' if in_class => {
                if chars.peek() == Some(&':') {
                    out.push('[');
                    for c2 in chars.by_ref() {
                        out.push(c2);
                        if c2 == ']' {
                            break;
                        }
                    }
                } else {
                    out.push_str("\\[");
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii() {
        assert_eq!(translate_re2(r"^\d+$"), "^[0-9]+$");
        assert_eq!(translate_re2(r"[\d.]"), "[0-9.]");
        let r = regex::Regex::new(&translate_re2(r"^\w+$")).unwrap();
        assert!(!r.is_match("é"));
    }
}
