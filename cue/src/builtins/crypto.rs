//! Packages `crypto/sha256`, `crypto/sha1`, `crypto/sha512`, `crypto/md5` and `crypto/hmac`
//! (upstream `pkg/crypto/...`): digests of bytes or strings, returned as bytes.
//!
//! Rules:
//! - Every `Sum*` takes bytes or a string (its UTF-8 bytes) and returns the digest as bytes;
//!   `hex.Encode(sha256.Sum256(x))` gives the usual hex text.
//! - `hmac.Sign(hash, key, data)` names the hash with the package's constants (`hmac.SHA256` is
//!   the string `"SHA256"`); an unknown name is an error.
//! - MD5 is implemented here (RFC 1321); the SHA families come from the `sha1`/`sha2` crates.

use super::args::{builtin, fail, Bytes};
use super::{Builtin, Package, Val};
use sha2::Digest as _;

fn int(i: i64) -> Option<Val> {
    Some(Val::Int(i.into()))
}

/// `crypto/sha256`.
pub(crate) const SHA256: Package = Package {
    path: "crypto/sha256",
    funcs: SHA256_FUNCS,
    consts: |name| match name {
        "Size" => int(32),
        "Size224" => int(28),
        "BlockSize" => int(64),
        _ => None,
    },
};

static SHA256_FUNCS: &[Builtin] = &[
    Builtin::f("crypto/sha256", "Sum256", 1, sum256),
    Builtin::f("crypto/sha256", "Sum224", 1, sum224),
];

/// `crypto/sha1`.
pub(crate) const SHA1: Package = Package {
    path: "crypto/sha1",
    funcs: SHA1_FUNCS,
    consts: |name| match name {
        "Size" => int(20),
        "BlockSize" => int(64),
        _ => None,
    },
};

static SHA1_FUNCS: &[Builtin] = &[Builtin::f("crypto/sha1", "Sum", 1, sha1_sum)];

/// `crypto/sha512`.
pub(crate) const SHA512: Package = Package {
    path: "crypto/sha512",
    funcs: SHA512_FUNCS,
    consts: |name| match name {
        "Size" => int(64),
        "Size224" => int(28),
        "Size256" => int(32),
        "Size384" => int(48),
        "BlockSize" => int(128),
        _ => None,
    },
};

static SHA512_FUNCS: &[Builtin] = &[
    Builtin::f("crypto/sha512", "Sum512", 1, sum512),
    Builtin::f("crypto/sha512", "Sum384", 1, sum384),
    Builtin::f("crypto/sha512", "Sum512_224", 1, sum512_224),
    Builtin::f("crypto/sha512", "Sum512_256", 1, sum512_256),
];

/// `crypto/md5`.
pub(crate) const MD5: Package = Package {
    path: "crypto/md5",
    funcs: MD5_FUNCS,
    consts: |name| match name {
        "Size" => int(16),
        "BlockSize" => int(64),
        _ => None,
    },
};

static MD5_FUNCS: &[Builtin] = &[Builtin::f("crypto/md5", "Sum", 1, md5_sum)];

/// `crypto/hmac`.
pub(crate) const HMAC: Package = Package {
    path: "crypto/hmac",
    funcs: HMAC_FUNCS,
    consts: |name| match name {
        "MD5" | "SHA1" | "SHA224" | "SHA256" | "SHA384" | "SHA512" | "SHA512_224"
        | "SHA512_256" => Some(Val::String(name.to_string())),
        _ => None,
    },
};

static HMAC_FUNCS: &[Builtin] = &[Builtin::f("crypto/hmac", "Sign", 3, hmac_sign)];

/// MD5 (RFC 1321).
pub(crate) fn md5(data: &[u8]) -> [u8; 16] {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5,
        9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10,
        15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_le_bytes());
    let (mut a0, mut b0, mut c0, mut d0) = (
        0x6745_2301u32,
        0xefcd_ab89u32,
        0x98ba_dcfeu32,
        0x1032_5476u32,
    );
    for chunk in msg.chunks_exact(64) {
        let m: Vec<u32> = chunk
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let (mut a, mut b, mut c, mut d) = (a0, b0, c0, d0);
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        a0 = a0.wrapping_add(a);
        b0 = b0.wrapping_add(b);
        c0 = c0.wrapping_add(c);
        d0 = d0.wrapping_add(d);
    }
    let mut out = [0u8; 16];
    for (i, w) in [a0, b0, c0, d0].iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

fn bytes(b: &[u8]) -> Val {
    Val::Bytes(b.to_vec())
}

builtin! {
    /// `Sum256("abc")` → `'\xba\x78\x16\xbf...'` (32 bytes).
    fn sum256(_, "sha256.Sum256", data: Bytes) {
        Ok(bytes(&sha2::Sha256::digest(data.0)))
    }
}

builtin! {
    /// `Sum224("abc")` → 28 bytes.
    fn sum224(_, "sha256.Sum224", data: Bytes) {
        Ok(bytes(&sha2::Sha224::digest(data.0)))
    }
}

builtin! {
    /// `Sum("abc")` → 20 bytes (`a9993e36...`).
    fn sha1_sum(_, "sha1.Sum", data: Bytes) {
        Ok(bytes(&sha1::Sha1::digest(data.0)))
    }
}

builtin! {
    /// `Sum512("abc")` → 64 bytes.
    fn sum512(_, "sha512.Sum512", data: Bytes) {
        Ok(bytes(&sha2::Sha512::digest(data.0)))
    }
}

builtin! {
    /// `Sum384("abc")` → 48 bytes.
    fn sum384(_, "sha512.Sum384", data: Bytes) {
        Ok(bytes(&sha2::Sha384::digest(data.0)))
    }
}

builtin! {
    /// `Sum512_224("abc")` → 28 bytes.
    fn sum512_224(_, "sha512.Sum512_224", data: Bytes) {
        Ok(bytes(&sha2::Sha512_224::digest(data.0)))
    }
}

builtin! {
    /// `Sum512_256("abc")` → 32 bytes.
    fn sum512_256(_, "sha512.Sum512_256", data: Bytes) {
        Ok(bytes(&sha2::Sha512_256::digest(data.0)))
    }
}

builtin! {
    /// `Sum("abc")` → 16 bytes (`90015098...`).
    fn md5_sum(_, "md5.Sum", data: Bytes) {
        Ok(bytes(&md5(data.0)))
    }
}

fn digest(name: &str, data: &[u8]) -> Option<(Vec<u8>, usize)> {
    Some(match name {
        "MD5" => (md5(data).to_vec(), 64),
        "SHA1" => (sha1::Sha1::digest(data).to_vec(), 64),
        "SHA224" => (sha2::Sha224::digest(data).to_vec(), 64),
        "SHA256" => (sha2::Sha256::digest(data).to_vec(), 64),
        "SHA384" => (sha2::Sha384::digest(data).to_vec(), 128),
        "SHA512" => (sha2::Sha512::digest(data).to_vec(), 128),
        "SHA512_224" => (sha2::Sha512_224::digest(data).to_vec(), 128),
        "SHA512_256" => (sha2::Sha512_256::digest(data).to_vec(), 128),
        _ => return None,
    })
}

builtin! {
    /// `Sign("SHA256", "key", "data")` → the HMAC-SHA256 of `data` (32 bytes).
    fn hmac_sign(_, "hmac.Sign", hash: &str, key: Bytes, data: Bytes) {
        let Some((_, block)) = digest(hash, b"") else {
            fail!("unsupported hash function {hash:?}");
        };
        let mut k = key.0.to_vec();
        if k.len() > block {
            k = digest(hash, &k).map(|d| d.0).unwrap_or_default();
        }
        k.resize(block, 0);
        let mut inner: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
        inner.extend_from_slice(data.0);
        let inner = digest(hash, &inner).map(|d| d.0).unwrap_or_default();
        let mut outer: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
        outer.extend_from_slice(&inner);
        Ok(bytes(&digest(hash, &outer).map(|d| d.0).unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_const, check_table};

    fn hx(s: &str) -> String {
        let bytes: Vec<String> = (0..s.len() / 2)
            .map(|i| format!("\\x{}", &s[2 * i..2 * i + 2]))
            .collect();
        format!("'{}'", bytes.join(""))
    }

    #[test]
    fn tables() {
        let abc256 = hx("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let empty256 = hx("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        let abc224 = hx("23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7");
        check_table(
            "crypto/sha256",
            &[
                (r#"Sum256("abc")"#, &abc256),
                (r#"Sum256('')"#, &empty256),
                (r#"Sum224("abc")"#, &abc224),
                (
                    "Sum256(1)",
                    "!invalid argument 0 to sha256.Sum256: expected bytes|string, found int",
                ),
            ],
        );
        let abc1 = hx("a9993e364706816aba3e25717850c26c9cd0d89d");
        check_table("crypto/sha1", &[(r#"Sum("abc")"#, &abc1)]);
        let abc512 = hx("ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
        let abc384 = hx("cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7");
        let abc512_224 = hx("4634270f707b6a54daae7530460842e20e37ed265ceee9a43e8924aa");
        let abc512_256 = hx("53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23");
        check_table(
            "crypto/sha512",
            &[
                (r#"Sum512("abc")"#, &abc512),
                (r#"Sum384("abc")"#, &abc384),
                (r#"Sum512_224("abc")"#, &abc512_224),
                (r#"Sum512_256("abc")"#, &abc512_256),
            ],
        );
        let abc5 = hx("900150983cd24fb0d6963f7d28e17f72");
        let empty5 = hx("d41d8cd98f00b204e9800998ecf8427e");
        let fox5 = hx("9e107d9d372bb6826bd81d3542a419d6");
        check_table(
            "crypto/md5",
            &[
                (r#"Sum("abc")"#, &abc5),
                (r#"Sum("")"#, &empty5),
                (
                    r#"Sum("The quick brown fox jumps over the lazy dog")"#,
                    &fox5,
                ),
            ],
        );
        // RFC 4231 test case 2 and RFC 2202 test case 2.
        let h256 = hx("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let hmd5 = hx("750c783e6ab0b503eaa86e310a5db738");
        check_table(
            "crypto/hmac",
            &[
                (
                    r#"Sign("SHA256", "Jefe", "what do ya want for nothing?")"#,
                    &h256,
                ),
                (
                    r#"Sign("MD5", "Jefe", "what do ya want for nothing?")"#,
                    &hmd5,
                ),
                (r#"Sign("SHA3", "k", "d")"#, "!unsupported hash function"),
            ],
        );
        check_const("crypto/sha256", "Size", "32");
        check_const("crypto/sha512", "BlockSize", "128");
        check_const("crypto/hmac", "SHA256", r#""SHA256""#);
    }

    #[test]
    fn md5_handles_block_boundaries() {
        // 55, 56 and 64 bytes straddle the padding boundary.
        for n in [55usize, 56, 63, 64, 65, 119, 120] {
            let data = vec![b'a'; n];
            let d1 = super::md5(&data);
            let mut twice = data.clone();
            twice.push(b'a');
            assert_ne!(d1, super::md5(&twice), "{n}");
        }
        assert_eq!(
            super::md5(&[b'a'; 64])
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "014842d480b571495a4a0363793f7367"
        );
    }
}
