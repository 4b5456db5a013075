//! Package `html` (upstream `pkg/html`, Go's `html`).
//!
//! Rules: `Escape` replaces `<`, `>`, `&`, `'` and `"` with `&lt;`, `&gt;`, `&amp;`, `&#39;` and
//! `&#34;`, like Go's `html.EscapeString`. `Unescape` decodes numeric references (`&#39;`,
//! `&#x27;`, invalid or zero code points becoming U+FFFD) and named entities. Approximation: only
//! the common named entities are known (the XML five, `nbsp`, `copy`, `reg`, `trade`, dashes,
//! quotes, `hellip`, `euro`, ...); an unknown `&name;` is kept as is.

use super::args::builtin;
use super::{no_consts, Builtin, Package, Val};

const P: &str = "html";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Escape", 1, escape),
    Builtin::f(P, "Unescape", 1, unescape),
];

builtin! {
    /// `Escape("<a href='x'>&</a>")` → `"&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"`.
    fn escape(_, "html.Escape", s: &str) {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '&' => out.push_str("&amp;"),
                '\'' => out.push_str("&#39;"),
                '"' => out.push_str("&#34;"),
                c => out.push(c),
            }
        }
        Ok(Val::String(out))
    }
}

const ENTITIES: &[(&str, &str)] = &[
    ("amp", "&"),
    ("lt", "<"),
    ("gt", ">"),
    ("quot", "\""),
    ("apos", "'"),
    ("nbsp", "\u{a0}"),
    ("copy", "©"),
    ("reg", "®"),
    ("trade", "™"),
    ("hellip", "…"),
    ("mdash", "—"),
    ("ndash", "–"),
    ("lsquo", "‘"),
    ("rsquo", "’"),
    ("ldquo", "“"),
    ("rdquo", "”"),
    ("laquo", "«"),
    ("raquo", "»"),
    ("euro", "€"),
    ("pound", "£"),
    ("yen", "¥"),
    ("cent", "¢"),
    ("sect", "§"),
    ("para", "¶"),
    ("middot", "·"),
    ("deg", "°"),
    ("plusmn", "±"),
    ("times", "×"),
    ("divide", "÷"),
    ("bull", "•"),
    ("larr", "←"),
    ("rarr", "→"),
    ("uarr", "↑"),
    ("darr", "↓"),
    ("shy", "\u{ad}"),
];

fn numeric(body: &str) -> Option<char> {
    let v = if let Some(h) = body.strip_prefix(['x', 'X']) {
        u32::from_str_radix(h, 16).ok()?
    } else {
        body.parse::<u32>().ok()?
    };
    Some(match v {
        0 => '\u{FFFD}',
        v => char::from_u32(v).unwrap_or('\u{FFFD}'),
    })
}

builtin! {
    /// `Unescape("&lt;b&gt; &#39;x&#x27; &copy;")` → `"<b> 'x' ©"`.
    fn unescape(_, "html.Unescape", s: &str) {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find('&') {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            let end = rest.find(';').filter(|&e| e <= 33);
            let decoded = end.and_then(|e| {
                let body = &rest[1..e];
                let text = match body.strip_prefix('#') {
                    Some(num) => numeric(num).map(String::from),
                    None => ENTITIES.iter().find(|(n, _)| *n == body).map(|(_, v)| v.to_string()),
                };
                text.map(|t| (t, e + 1))
            });
            match decoded {
                Some((t, len)) => {
                    out.push_str(&t);
                    rest = &rest[len..];
                }
                None => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
        }
        out.push_str(rest);
        Ok(Val::String(out))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "html",
            &[
                (
                    r#"Escape("<a href='x'>&</a>")"#,
                    r#""&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;""#,
                ),
                (r#"Escape("\"")"#, r#""&#34;""#),
                (
                    r#"Unescape("&lt;b&gt; &#39;x&#x27; &copy;")"#,
                    r#""<b> 'x' ©""#,
                ),
                (
                    r#"Unescape("a & b &unknown; &#0;")"#,
                    "\"a & b &unknown; \u{FFFD}\"",
                ),
                (r#"Unescape(1)"#, "!expected string, found int"),
            ],
        );
    }
}
