//! Test support: a tiny reader for CUE literal values and calls, a mock [`Host`], and the table
//! runner each package's tests use.
//!
//! A table row is `("Name(arg, ...)", "result")`: the call is parsed, the builtin looked up in
//! the package and run, and its result compared with the parsed expected value. An expected
//! text starting with `!` means the call must fail with an error containing the rest, and `?`
//! means it must fail as incomplete. The same rows appear in the builtins' `///` docs.
//!
//! Literal syntax: `null`, `true`, `false`, ints, floats (`1.5`, `1e3` — a `.` or exponent makes
//! a float), `"strings"` with Go escapes, `'bytes'` with `\xHH`, `[lists]`, `{a: 1, "b-c": 2}`,
//! and `_N` for `Val::Opaque(N)`.

use super::{lookup, BuiltinError, Host, Member, Val};
use bigdecimal::BigDecimal;
use num_bigint::BigInt;

/// A host whose comparators are `_1` (ascending on numbers or strings) and `_2` (ascending on
/// field `a`), and whose unification is equality.
pub struct TestHost;

fn cmp_vals(x: &Val, y: &Val) -> Option<std::cmp::Ordering> {
    match (x, y) {
        (Val::String(a), Val::String(b)) => Some(a.cmp(b)),
        _ => {
            let a = crate::data::num::to_decimal(x)?;
            let b = crate::data::num::to_decimal(y)?;
            a.partial_cmp(&b)
        }
    }
}

fn field<'a>(v: &'a Val, name: &str) -> Option<&'a Val> {
    match v {
        Val::Struct(fs) => fs.iter().find(|(k, _)| k == name).map(|(_, v)| v),
        _ => None,
    }
}

impl Host for TestHost {
    fn less(&mut self, comparator: &Val, x: &Val, y: &Val) -> Result<bool, BuiltinError> {
        let ord = match comparator {
            Val::Opaque(1) => cmp_vals(x, y),
            Val::Opaque(2) => match (field(x, "a"), field(y, "a")) {
                (Some(a), Some(b)) => cmp_vals(a, b),
                _ => None,
            },
            _ => None,
        };
        ord.map(|o| o.is_lt())
            .ok_or_else(|| BuiltinError::new("test host: cannot compare"))
    }

    fn unifies(&mut self, a: &Val, b: &Val) -> Result<bool, BuiltinError> {
        Ok(matches!(a, Val::Opaque(_)) || matches!(b, Val::Opaque(_)) || a == b)
    }
}

struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> u8 {
        self.ws();
        self.s.get(self.pos).copied().unwrap_or(0)
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == c {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) {
        assert!(
            self.eat(c),
            "expected {:?} at {} in {:?}",
            c as char,
            self.pos,
            String::from_utf8_lossy(self.s)
        );
    }

    fn ident(&mut self) -> String {
        self.ws();
        let start = self.pos;
        while self.pos < self.s.len()
            && (self.s[self.pos].is_ascii_alphanumeric() || b"_.$#".contains(&self.s[self.pos]))
        {
            self.pos += 1;
        }
        String::from_utf8(self.s[start..self.pos].to_vec()).unwrap()
    }

    fn quoted(&mut self, q: u8) -> Vec<u8> {
        self.expect(q);
        let mut out = Vec::new();
        loop {
            let c = self.s[self.pos];
            self.pos += 1;
            if c == q {
                return out;
            }
            if c != b'\\' {
                out.push(c);
                continue;
            }
            let e = self.s[self.pos];
            self.pos += 1;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'0' => out.push(0),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'x' => {
                    let h = std::str::from_utf8(&self.s[self.pos..self.pos + 2]).unwrap();
                    out.push(u8::from_str_radix(h, 16).unwrap());
                    self.pos += 2;
                }
                b'u' | b'U' => {
                    let n = if e == b'u' { 4 } else { 8 };
                    let h = std::str::from_utf8(&self.s[self.pos..self.pos + n]).unwrap();
                    let c = char::from_u32(u32::from_str_radix(h, 16).unwrap()).unwrap();
                    out.extend_from_slice(c.to_string().as_bytes());
                    self.pos += n;
                }
                other => out.push(other),
            }
        }
    }

    fn value(&mut self) -> Val {
        match self.peek() {
            b'"' => Val::String(String::from_utf8(self.quoted(b'"')).unwrap()),
            b'\'' => Val::Bytes(self.quoted(b'\'')),
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                while !self.eat(b']') {
                    items.push(self.value());
                    self.eat(b',');
                }
                Val::List(items)
            }
            b'{' => {
                self.pos += 1;
                let mut fields = Vec::new();
                while !self.eat(b'}') {
                    let name = if self.peek() == b'"' {
                        String::from_utf8(self.quoted(b'"')).unwrap()
                    } else {
                        self.ident()
                    };
                    self.expect(b':');
                    fields.push((name, self.value()));
                    self.eat(b',');
                }
                Val::Struct(fields)
            }
            b'_' => {
                self.pos += 1;
                Val::Opaque(self.ident().parse().unwrap())
            }
            c if c == b'-' || c == b'+' || c.is_ascii_digit() || c == b'.' => {
                let start = self.pos;
                self.pos += 1;
                while self.pos < self.s.len()
                    && (self.s[self.pos].is_ascii_digit()
                        || b".eE".contains(&self.s[self.pos])
                        || (b"+-".contains(&self.s[self.pos])
                            && b"eE".contains(&self.s[self.pos - 1])))
                {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap();
                if text.contains(['.', 'e', 'E']) {
                    Val::Float(text.parse::<BigDecimal>().unwrap())
                } else {
                    Val::Int(text.parse::<BigInt>().unwrap())
                }
            }
            _ => match self.ident().as_str() {
                "null" => Val::Null,
                "true" => Val::Bool(true),
                "false" => Val::Bool(false),
                other => panic!("bad literal {other:?}"),
            },
        }
    }
}

/// Parses one literal value.
pub fn val(s: &str) -> Val {
    let mut r = Reader {
        s: s.as_bytes(),
        pos: 0,
    };
    let v = r.value();
    r.ws();
    assert_eq!(r.pos, s.len(), "trailing input in {s:?}");
    v
}

/// Parses `Name(args...)`.
pub fn call(s: &str) -> (String, Vec<Val>) {
    let mut r = Reader {
        s: s.as_bytes(),
        pos: 0,
    };
    let name = r.ident();
    r.expect(b'(');
    let mut args = Vec::new();
    while !r.eat(b')') {
        args.push(r.value());
        r.eat(b',');
    }
    r.ws();
    assert_eq!(r.pos, s.len(), "trailing input in {s:?}");
    (name, args)
}

/// Runs `pkg.Name(args)`.
pub fn run(pkg: &str, name: &str, args: &[Val]) -> Result<Val, BuiltinError> {
    match lookup(pkg, name) {
        Some(Member::Func(b)) => (b.func)(&mut TestHost, args),
        other => panic!("{pkg}.{name} is not a function: {other:?}"),
    }
}

/// Runs every row of a table (see the module doc) and checks every function of `pkg` has a row.
pub fn check_table(pkg: &str, rows: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (input, want) in rows {
        let (name, args) = call(input);
        let got = run(pkg, &name, &args);
        let ok = match (want.strip_prefix('!'), want.strip_prefix('?'), &got) {
            (Some(msg), _, Err(e)) => e.message.contains(msg) && !e.incomplete,
            (_, Some(msg), Err(e)) => e.message.contains(msg) && e.incomplete,
            (None, None, Ok(v)) => *v == val(want),
            _ => false,
        };
        if !ok {
            failures.push(format!("{pkg}.{input}: want {want}, got {got:?}"));
        }
    }
    for b in super::functions(pkg) {
        let covered = rows
            .iter()
            .any(|(input, want)| !want.starts_with(['!', '?']) && call(input).0 == b.name);
        if !covered {
            failures.push(format!("{pkg}.{} has no successful example", b.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Checks a constant member.
pub fn check_const(pkg: &str, name: &str, want: &str) {
    match lookup(pkg, name) {
        Some(Member::Const(v)) => assert_eq!(v, val(want), "{pkg}.{name}"),
        other => panic!("{pkg}.{name} is not a constant: {other:?}"),
    }
}

/// A small deterministic generator for property tests (xorshift64).
pub struct Rng(pub u64);

impl Rng {
    /// The next pseudo-random number.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A string mixing ASCII, YAML/JSON-special characters and non-ASCII text.
    pub fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a",
            "b",
            "Z",
            "0",
            "1",
            " ",
            "-",
            ":",
            "#",
            "\"",
            "'",
            "\\",
            "\n",
            "\t",
            "<",
            "&",
            "é",
            "☺",
            "😀",
            "true",
            "null",
            "yes",
            "1.5",
            "{",
            "}",
            "[",
            "]",
            ",",
            "?",
            "*",
            "!",
            "|",
            ">",
            "%",
            "@",
            "`",
            "~",
            "0x1F",
            "2006-01-02",
            "\u{2028}",
            "\u{7f}",
            "\r",
        ];
        let n = self.below(6);
        (0..n)
            .map(|_| PIECES[self.below(PIECES.len() as u64) as usize])
            .collect()
    }

    /// A random JSON-representable value of at most `depth` levels.
    pub fn json_val(&mut self, depth: u32) -> Val {
        let kinds = if depth == 0 { 6 } else { 8 };
        match self.below(kinds) {
            0 => Val::Null,
            1 => Val::Bool(self.below(2) == 1),
            2 => Val::Int(BigInt::from(self.next() as i64 >> self.below(60))),
            3 => {
                // At most ten significant digits, so YAML's trip through a double is exact.
                let m = (((self.next() >> 30) as i64) - (1 << 33)) >> self.below(30) | 1;
                let scale = 1 + self.below(6) as i64;
                Val::Float(BigDecimal::new(m.into(), scale))
            }
            4 | 5 => Val::String(self.string()),
            6 => Val::List(
                (0..self.below(4))
                    .map(|_| self.json_val(depth - 1))
                    .collect(),
            ),
            _ => {
                let mut fields: Vec<(String, Val)> = Vec::new();
                for _ in 0..self.below(4) {
                    let k = self.string();
                    if fields.iter().all(|(k2, _)| *k2 != k) {
                        let v = self.json_val(depth - 1);
                        fields.push((k, v));
                    }
                }
                Val::Struct(fields)
            }
        }
    }
}
