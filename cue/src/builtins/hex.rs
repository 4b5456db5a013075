//! Package `encoding/hex` (upstream `pkg/encoding/hex`, Go's `encoding/hex`).
//!
//! Rules: `Encode` writes lower-case hex; `Decode` accepts either case and reports Go's errors
//! (`encoding/hex: invalid byte: U+0067 'g'`, `encoding/hex: odd length hex string`); `Dump`
//! is Go's `hex.Dump` (the `hexdump -C` layout).

use super::args::{builtin, fail, Bytes};
use super::{no_consts, Builtin, Package, Val};

const P: &str = "encoding/hex";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "EncodedLen", 1, encoded_len),
    Builtin::f(P, "DecodedLen", 1, decoded_len),
    Builtin::f(P, "Decode", 1, decode),
    Builtin::f(P, "Dump", 1, dump),
    Builtin::f(P, "Encode", 1, encode),
];

builtin! {
    /// `EncodedLen(3)` → `6`.
    fn encoded_len(_, "hex.EncodedLen", n: i64) {
        Ok(Val::Int((n.saturating_mul(2)).into()))
    }
}

builtin! {
    /// `DecodedLen(6)` → `3`.
    fn decoded_len(_, "hex.DecodedLen", x: i64) {
        Ok(Val::Int((x / 2).into()))
    }
}

builtin! {
    /// `Encode("hi")` → `"6869"`.
    fn encode(_, "hex.Encode", src: Bytes) {
        Ok(Val::String(hex::encode(src.0)))
    }
}

/// Go's `%#U` of a byte taken as a code point.
fn go_char(b: u8) -> String {
    let c = char::from(b);
    if super::strconv::is_printable(c) {
        format!("U+{:04X} '{c}'", b)
    } else {
        format!("U+{:04X}", b)
    }
}

builtin! {
    /// `Decode("6869")` → `'hi'`; `Decode("zz")` is `encoding/hex: invalid byte: U+007A 'z'`.
    fn decode(_, "hex.Decode", s: &str) {
        // Go checks every byte (an invalid byte is an earlier problem than an odd length).
        if let Some(&bad) = s.as_bytes().iter().find(|b| !b.is_ascii_hexdigit()) {
            fail!("encoding/hex: invalid byte: {}", go_char(bad));
        }
        if s.len() % 2 == 1 {
            fail!("encoding/hex: odd length hex string");
        }
        match hex::decode(s) {
            Ok(v) => Ok(Val::Bytes(v)),
            Err(e) => fail!("encoding/hex: {e}"),
        }
    }
}

/// Go's `hex.Dump`.
pub(crate) fn go_dump(data: &[u8]) -> String {
    let mut out = String::new();
    for (line, chunk) in data.chunks(16).enumerate() {
        out.push_str(&format!("{:08x}  ", line * 16));
        for i in 0..16 {
            match chunk.get(i) {
                Some(b) => out.push_str(&format!("{b:02x} ")),
                None => out.push_str("   "),
            }
            if i == 7 {
                out.push(' ');
            }
        }
        out.push_str(" |");
        for &b in chunk {
            out.push(if (32..=126).contains(&b) {
                b as char
            } else {
                '.'
            });
        }
        out.push_str("|\n");
    }
    out
}

builtin! {
    /// `Dump("hello")` → `"00000000  68 65 6c 6c 6f                                    |hello|\n"`.
    fn dump(_, "hex.Dump", data: Bytes) {
        Ok(Val::String(go_dump(data.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "encoding/hex",
            &[
                ("EncodedLen(3)", "6"),
                ("DecodedLen(6)", "3"),
                (r#"Encode("hi")"#, r#""6869""#),
                (r#"Encode('\xff\x00')"#, r#""ff00""#),
                (r#"Decode("6869")"#, "'hi'"),
                (r#"Decode("FF00")"#, r#"'\xff\x00'"#),
                (r#"Decode("zz")"#, "!encoding/hex: invalid byte: U+007A 'z'"),
                (r#"Decode("abc")"#, "!encoding/hex: odd length hex string"),
                (
                    r#"Dump("hello")"#,
                    r#""00000000  68 65 6c 6c 6f                                    |hello|\n""#,
                ),
                (
                    r#"Dump("0123456789abcdefXY")"#,
                    r#""00000000  30 31 32 33 34 35 36 37  38 39 61 62 63 64 65 66  |0123456789abcdef|\n00000010  58 59                                             |XY|\n""#,
                ),
            ],
        );
    }
}
