//! Package `encoding/base64` (upstream `pkg/encoding/base64`).
//!
//! Rules: the first argument selects the encoding and must be `null` (Go's `StdEncoding`,
//! padded, alphabet `A–Z a–z 0–9 + /`); `Decode` ignores `\r` and `\n` like Go and reports
//! `illegal base64 data at input byte N`.

use super::args::{builtin, fail, Bytes};
use super::{no_consts, Builtin, BuiltinError, Package, Val};
use base64::Engine as _;

const P: &str = "encoding/base64";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "EncodedLen", 2, encoded_len),
    Builtin::f(P, "DecodedLen", 2, decoded_len),
    Builtin::f(P, "Encode", 2, encode),
    Builtin::f(P, "Decode", 2, decode),
];

fn check_encoding(enc: &Val) -> Result<(), BuiltinError> {
    match enc {
        Val::Null => Ok(()),
        _ => fail!(
            "base64: unsupported encoding: cannot use value {} (expected null)",
            super::args::kind_name(enc)
        ),
    }
}

builtin! {
    /// `EncodedLen(null, 5)` → `8`.
    fn encoded_len(_, "base64.EncodedLen", enc: &Val, n: i64) {
        check_encoding(enc)?;
        Ok(Val::Int(((n.max(0) + 2) / 3 * 4).into()))
    }
}

builtin! {
    /// `DecodedLen(null, 8)` → `6`.
    fn decoded_len(_, "base64.DecodedLen", enc: &Val, x: i64) {
        check_encoding(enc)?;
        Ok(Val::Int((x.max(0) / 4 * 3).into()))
    }
}

builtin! {
    /// `Encode(null, "foo")` → `"Zm9v"`.
    fn encode(_, "base64.Encode", enc: &Val, src: Bytes) {
        check_encoding(enc)?;
        Ok(Val::String(base64::engine::general_purpose::STANDARD.encode(src.0)))
    }
}

builtin! {
    /// `Decode(null, "Zm9v")` → `'foo'`; `Decode(null, "Zm9")` is an error.
    fn decode(_, "base64.Decode", enc: &Val, s: Bytes) {
        check_encoding(enc)?;
        // Go skips CR and LF anywhere; positions in errors refer to the input.
        let positions: Vec<usize> = s.0.iter().enumerate().filter(|(_, &c)| c != b'\r' && c != b'\n').map(|(i, _)| i).collect();
        let clean: Vec<u8> = positions.iter().map(|&i| s.0[i]).collect();
        match base64::engine::general_purpose::STANDARD.decode(&clean) {
            Ok(v) => Ok(Val::Bytes(v)),
            Err(e) => {
                let at = match e {
                    base64::DecodeError::InvalidByte(i, _) | base64::DecodeError::InvalidLastSymbol(i, _) => i,
                    _ => clean.len() - clean.len() % 4,
                };
                let at = positions.get(at).copied().unwrap_or(s.0.len());
                fail!("illegal base64 data at input byte {at}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "encoding/base64",
            &[
                ("EncodedLen(null, 5)", "8"),
                ("DecodedLen(null, 8)", "6"),
                (r#"Encode(null, "foo")"#, r#""Zm9v""#),
                (r#"Encode(null, '\xff\xfe')"#, r#""//4=""#),
                (r#"Encode("url", "foo")"#, "!unsupported encoding"),
                (r#"Decode(null, "Zm9v")"#, "'foo'"),
                (r#"Decode(null, "Zm9v\nYmFy")"#, "'foobar'"),
                (
                    r#"Decode(null, "Zm9")"#,
                    "!illegal base64 data at input byte 0",
                ),
                (
                    r#"Decode(null, "Zm9v!")"#,
                    "!illegal base64 data at input byte 4",
                ),
            ],
        );
    }
}
