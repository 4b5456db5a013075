//! Package `uuid` (upstream `pkg/uuid`, over Google's `uuid` Go package): name-based UUIDs
//! (version 5 with SHA-1, version 3 with MD5), parsing and inspection.
//!
//! Rules:
//! - UUIDs are strings in the canonical lower-case form `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
//! - `Parse`, `URN`, `Variant`, `Version`, `SHA1` and `MD5` accept what Go's `uuid.Parse` accepts:
//!   the canonical form in either case, `urn:uuid:` + canonical, `{canonical}`, and 32 hex digits.
//! - `Valid` is a validator that accepts only the canonical lower-case form; a failure is an error
//!   `invalid UUID "..."`, as upstream.
//! - `ns` is a struct constant with the RFC 4122 name spaces `DNS`, `URL`, `OID`, `X500` and `Nil`.
//! - `ToInt` follows upstream literally: it reads the *text* of the UUID as a big-endian number.

use super::args::{builtin, fail, Bytes};
use super::crypto::md5;
use super::{Builtin, BuiltinError, Package, Val};
use num_bigint::{BigInt, Sign};
use sha1::Digest as _;

const P: &str = "uuid";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts,
};

fn consts(name: &str) -> Option<Val> {
    if name != "ns" {
        return None;
    }
    let s = |k: &str, v: &str| (k.to_string(), Val::String(v.to_string()));
    Some(Val::Struct(vec![
        s("DNS", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
        s("URL", "6ba7b811-9dad-11d1-80b4-00c04fd430c8"),
        s("OID", "6ba7b812-9dad-11d1-80b4-00c04fd430c8"),
        s("X500", "6ba7b814-9dad-11d1-80b4-00c04fd430c8"),
        s("Nil", "00000000-0000-0000-0000-000000000000"),
    ]))
}

static FUNCS: &[Builtin] = &[
    Builtin::v(P, "Valid", 1, valid),
    Builtin::f(P, "Parse", 1, parse),
    Builtin::f(P, "ToString", 1, to_string),
    Builtin::f(P, "URN", 1, urn),
    Builtin::f(P, "FromInt", 1, from_int),
    Builtin::f(P, "ToInt", 1, to_int),
    Builtin::f(P, "Variant", 1, variant),
    Builtin::f(P, "Version", 1, version),
    Builtin::f(P, "SHA1", 2, sha1_uuid),
    Builtin::f(P, "MD5", 2, md5_uuid),
];

/// Go's `uuid.Parse`.
fn parse_uuid(s: &str) -> Result<[u8; 16], BuiltinError> {
    let hex_part: String = match s.len() {
        36 => canonical_digits(s)?,
        45 => match (s.get(..9), s.get(9..)) {
            (Some(prefix), Some(rest)) if prefix.eq_ignore_ascii_case("urn:uuid:") => {
                canonical_digits(rest)?
            }
            _ => fail!(
                "invalid urn prefix: {:?}",
                s.chars().take(9).collect::<String>()
            ),
        },
        38 => match s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            Some(inner) => canonical_digits(inner)?,
            None => fail!("invalid bracketed UUID format"),
        },
        32 => s.to_string(),
        n => fail!("invalid UUID length: {n}"),
    };
    let bytes = hex::decode(&hex_part).map_err(|_| BuiltinError::new("invalid UUID format"))?;
    let mut out = [0u8; 16];
    out.copy_from_slice(&bytes);
    Ok(out)
}

fn canonical_digits(s: &str) -> Result<String, BuiltinError> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        fail!("invalid UUID format");
    }
    Ok(s.chars().filter(|&c| c != '-').collect())
}

fn format_uuid(u: &[u8; 16]) -> String {
    let h = hex::encode(u);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn is_canonical(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == b'-'
            } else {
                c.is_ascii_digit() || (b'a'..=b'f').contains(&c)
            }
        })
}

builtin! {
    /// `Valid("052ef62d-7223-58b6-a551-c1deee46d401")` → `true`; upper case is
    /// `invalid UUID "..."`.
    fn valid(_, "uuid.Valid", s: &str) {
        if is_canonical(s) {
            Ok(Val::Bool(true))
        } else {
            fail!("invalid UUID {s:?}")
        }
    }
}

builtin! {
    /// `Parse("052ef62d722358b6a551c1deee46d401")` → `"052ef62d-7223-58b6-a551-c1deee46d401"`.
    fn parse(_, "uuid.Parse", s: &str) {
        Ok(Val::String(format_uuid(&parse_uuid(s)?)))
    }
}

builtin! {
    /// `ToString("x")` → `"x"` (the identity, as upstream).
    fn to_string(_, "uuid.ToString", s: &str) {
        Ok(Val::String(s.to_string()))
    }
}

builtin! {
    /// `URN("052ef62d-7223-58b6-a551-c1deee46d401")` → `"urn:uuid:052ef62d-7223-58b6-a551-c1deee46d401"`.
    fn urn(_, "uuid.URN", s: &str) {
        Ok(Val::String(format!("urn:uuid:{}", format_uuid(&parse_uuid(s)?))))
    }
}

builtin! {
    /// `FromInt(0x052ef62d722358b6a551c1deee46d401)` → `"052ef62d-7223-58b6-a551-c1deee46d401"`.
    fn from_int(_, "uuid.FromInt", i: &BigInt) {
        let (_, b) = i.to_bytes_be();
        let b = if i.sign() == Sign::NoSign { Vec::new() } else { b };
        if b.len() > 16 {
            fail!("invalid UUID (got {} bytes)", b.len());
        }
        let mut u = [0u8; 16];
        u[16 - b.len()..].copy_from_slice(&b);
        Ok(Val::String(format_uuid(&u)))
    }
}

builtin! {
    /// `ToInt("a")` → `97` (the bytes of the text, as upstream).
    fn to_int(_, "uuid.ToInt", s: &str) {
        Ok(Val::Int(BigInt::from_bytes_be(Sign::Plus, s.as_bytes())))
    }
}

builtin! {
    /// `Variant("052ef62d-7223-58b6-a551-c1deee46d401")` → `1` (RFC 4122).
    fn variant(_, "uuid.Variant", s: &str) {
        let b = parse_uuid(s)?[8];
        let v = if b & 0xc0 == 0x80 {
            1
        } else if b & 0xe0 == 0xc0 {
            2
        } else if b & 0xe0 == 0xe0 {
            3
        } else {
            0
        };
        Ok(Val::Int(v.into()))
    }
}

builtin! {
    /// `Version("052ef62d-7223-58b6-a551-c1deee46d401")` → `5`.
    fn version(_, "uuid.Version", s: &str) {
        Ok(Val::Int((parse_uuid(s)?[6] >> 4).into()))
    }
}

fn name_based(space: &str, data: &[u8], v: u8, sha: bool) -> Result<Val, BuiltinError> {
    let ns = parse_uuid(space)?;
    let mut input = ns.to_vec();
    input.extend_from_slice(data);
    let digest: Vec<u8> = if sha {
        sha1::Sha1::digest(&input).to_vec()
    } else {
        md5(&input).to_vec()
    };
    let mut u = [0u8; 16];
    u.copy_from_slice(&digest[..16]);
    u[6] = (u[6] & 0x0f) | (v << 4);
    u[8] = (u[8] & 0x3f) | 0x80;
    Ok(Val::String(format_uuid(&u)))
}

builtin! {
    /// `SHA1(uuid.ns.DNS, "cuelang.org")` → `"052ef62d-7223-58b6-a551-c1deee46d401"`.
    fn sha1_uuid(_, "uuid.SHA1", space: &str, data: Bytes) {
        name_based(space, data.0, 5, true)
    }
}

builtin! {
    /// `MD5(uuid.ns.URL, "https://cuelang.org")` → `"d891d69e-ae5c-39e0-9ead-164abd207f1f"`.
    fn md5_uuid(_, "uuid.MD5", space: &str, data: Bytes) {
        name_based(space, data.0, 3, false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        // Expected values from upstream's pkg/uuid/testdata/uuid.txtar.
        check_table(
            "uuid",
            &[
                (r#"Valid("052ef62d-7223-58b6-a551-c1deee46d401")"#, "true"),
                (r#"Valid("052EF62D-7223-58B6-A551-C1DEEE46D401")"#, r#"!invalid UUID "052EF62D-7223-58B6-A551-C1DEEE46D401""#),
                (r#"Valid("052ef62d_7223_58b6_a551_c1deee46d401")"#, "!invalid UUID"),
                (r#"Parse("052ef62d722358b6a551c1deee46d401")"#, r#""052ef62d-7223-58b6-a551-c1deee46d401""#),
                (r#"Parse("{052EF62D-7223-58B6-A551-C1DEEE46D401}")"#, r#""052ef62d-7223-58b6-a551-c1deee46d401""#),
                (r#"Parse("urn:uuid:052ef62d-7223-58b6-a551-c1deee46d401")"#, r#""052ef62d-7223-58b6-a551-c1deee46d401""#),
                (r#"Parse("nope")"#, "!invalid UUID length: 4"),
                (r#"Parse("urn:uuiéd:052ef62d-7223-58b6-a551-c1deee46d4")"#, "!invalid urn prefix"),
                (r#"Parse("é052ef62d-7223-58b6-a551-c1deee46d40}")"#, "!invalid bracketed UUID format"),
                (r#"Parse("052ef62d-7223-58b6-a551-c1deee46d4zz")"#, "!invalid UUID format"),
                (r#"ToString("x")"#, r#""x""#),
                (r#"URN("052ef62d-7223-58b6-a551-c1deee46d401")"#, r#""urn:uuid:052ef62d-7223-58b6-a551-c1deee46d401""#),
                ("FromInt(7160170316086321542340422136983391745)", r#""0562ffa6-fe4c-4a0b-9ec6-81dac6eb0e01""#),
                ("FromInt(0)", r#""00000000-0000-0000-0000-000000000000""#),
                ("FromInt(340282366920938463463374607431768211456)", "!invalid UUID (got 17 bytes)"),
                (
                    r#"ToInt("052ef62d-7223-58b6-a551-c1deee46d401")"#,
                    "93651793875903522077150095950593860979557386807737776869062002310283964632724204171313",
                ),
                (r#"Variant("052ef62d-7223-58b6-a551-c1deee46d401")"#, "1"),
                (r#"Version("052ef62d-7223-58b6-a551-c1deee46d401")"#, "5"),
                (r#"SHA1("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "cuelang.org")"#, r#""052ef62d-7223-58b6-a551-c1deee46d401""#),
                (r#"SHA1("bad", "x")"#, "!invalid UUID length: 3"),
                (r#"MD5("6ba7b811-9dad-11d1-80b4-00c04fd430c8", "https://cuelang.org")"#, r#""d891d69e-ae5c-39e0-9ead-164abd207f1f""#),
            ],
        );
        super::super::testing::check_const(
            "uuid",
            "ns",
            r#"{DNS: "6ba7b810-9dad-11d1-80b4-00c04fd430c8", URL: "6ba7b811-9dad-11d1-80b4-00c04fd430c8", OID: "6ba7b812-9dad-11d1-80b4-00c04fd430c8", X500: "6ba7b814-9dad-11d1-80b4-00c04fd430c8", Nil: "00000000-0000-0000-0000-000000000000"}"#,
        );
    }
}
