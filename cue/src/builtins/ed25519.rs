//! Package `crypto/ed25519` (upstream `pkg/crypto/ed25519`, Go's `crypto/ed25519.Verify`).
//!
//! Rules:
//! - `Valid(publicKey, message, signature)` takes bytes or strings; a public key that is not 32
//!   bytes is an error (`ed25519: publicKey must be 32 bytes`), every other failure is `false`.
//! - Verification is RFC 8032's, cofactorless as Go's: the signature is 64 bytes `R || S`, `S`
//!   must be canonical (below the group order `L`), the public key must decode to a curve point
//!   (non-canonical `y` encodings are accepted, as Go's `edwards25519.Point.SetBytes` does), and
//!   the encoding of `[S]B - [k]A` with `k = SHA-512(R || A || M) mod L` must equal `R` byte
//!   for byte.
//! - `PublicKeySize` is 32.
//!
//! The arithmetic is plain big-integer arithmetic in extended twisted-Edwards coordinates:
//! correct and small, not constant-time (nothing secret is handled; verification only).

use super::args::{builtin, fail, Bytes};
use super::{Builtin, Package, Val};
use num_bigint::BigUint;
use num_traits::{One, Zero};
use sha2::Digest as _;
use std::sync::OnceLock;

const P: &str = "crypto/ed25519";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: |name| match name {
        "PublicKeySize" => Some(Val::Int(32.into())),
        _ => None,
    },
};

static FUNCS: &[Builtin] = &[Builtin::v(P, "Valid", 3, valid)];

/// The curve constants: the field prime, `d`, `sqrt(-1)`, the group order and the base point.
struct Curve {
    p: BigUint,
    d: BigUint,
    sqrt_m1: BigUint,
    l: BigUint,
    base: Point,
}

fn curve() -> &'static Curve {
    static C: OnceLock<Curve> = OnceLock::new();
    C.get_or_init(|| {
        let p = (BigUint::one() << 255u32) - 19u32;
        let inv = |x: &BigUint| x.modpow(&(&p - 2u32), &p);
        // d = -121665 / 121666
        let d = (&p - BigUint::from(121_665u32)) * inv(&BigUint::from(121_666u32)) % &p;
        let sqrt_m1 = BigUint::from(2u32).modpow(&((&p - 1u32) >> 2u32), &p);
        let l = (BigUint::one() << 252u32)
            + BigUint::parse_bytes(b"14def9dea2f79cd65812631a5cf5d3ed", 16).unwrap_or_default();
        let five_inv = inv(&BigUint::from(5u32));
        let mut c = Curve {
            p,
            d,
            sqrt_m1,
            l,
            base: Point::identity(),
        };
        // The base point: y = 4/5, x even.
        let y = BigUint::from(4u32) * five_inv % &c.p;
        let mut enc = le32(&y);
        enc[31] &= 0x7f;
        c.base = decode(&c, &enc).unwrap_or_else(Point::identity);
        c
    })
}

/// A point in extended coordinates: x = X/Z, y = Y/Z, xy = T/Z.
#[derive(Clone)]
struct Point {
    x: BigUint,
    y: BigUint,
    z: BigUint,
    t: BigUint,
}

impl Point {
    fn identity() -> Point {
        Point {
            x: BigUint::zero(),
            y: BigUint::one(),
            z: BigUint::one(),
            t: BigUint::zero(),
        }
    }

    /// The unified addition of twisted Edwards curves with a = -1 (also doubles).
    fn add(&self, o: &Point, c: &Curve) -> Point {
        let p = &c.p;
        let sub = |a: &BigUint, b: &BigUint| (a + p - b) % p;
        let a = sub(&self.y, &self.x) * sub(&o.y, &o.x) % p;
        let b = (&self.y + &self.x) * (&o.y + &o.x) % p;
        let cc = BigUint::from(2u32) * &c.d % p * &self.t % p * &o.t % p;
        let dd = BigUint::from(2u32) * &self.z * &o.z % p;
        let e = sub(&b, &a);
        let f = sub(&dd, &cc);
        let g = (&dd + &cc) % p;
        let h = (&b + &a) % p;
        Point {
            x: &e * &f % p,
            y: &g * &h % p,
            t: &e * &h % p,
            z: &f * &g % p,
        }
    }

    fn neg(&self, c: &Curve) -> Point {
        Point {
            x: (&c.p - &self.x) % &c.p,
            y: self.y.clone(),
            z: self.z.clone(),
            t: (&c.p - &self.t) % &c.p,
        }
    }

    fn mul(&self, k: &BigUint, c: &Curve) -> Point {
        let mut acc = Point::identity();
        for i in (0..k.bits()).rev() {
            acc = acc.add(&acc, c);
            if k.bit(i) {
                acc = acc.add(self, c);
            }
        }
        acc
    }

    fn encode(&self, c: &Curve) -> [u8; 32] {
        let zinv = self.z.modpow(&(&c.p - 2u32), &c.p);
        let x = &self.x * &zinv % &c.p;
        let y = &self.y * &zinv % &c.p;
        let mut out = le32(&y);
        if x.bit(0) {
            out[31] |= 0x80;
        }
        out
    }
}

/// `v` as 32 little-endian bytes (`v` < 2^256).
fn le32(v: &BigUint) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, b) in out.iter_mut().zip(v.to_bytes_le()) {
        *o = b;
    }
    out
}

/// Decodes a point: `y` from the low 255 bits (reduced mod p), the sign of `x` from the top bit.
fn decode(c: &Curve, enc: &[u8; 32]) -> Option<Point> {
    let p = &c.p;
    let mut yb = *enc;
    let sign = yb[31] >> 7 == 1;
    yb[31] &= 0x7f;
    let y = BigUint::from_bytes_le(&yb) % p;
    let yy = &y * &y % p;
    let u = (&yy + p - 1u32) % p;
    let v = (&c.d * &yy + 1u32) % p;
    // x = u v^3 (u v^7)^((p-5)/8)
    let v3 = &v * &v % p * &v % p;
    let v7 = &v3 * &v3 % p * &v % p;
    let mut x = &u * &v3 % p * (&u * &v7 % p).modpow(&((p - 5u32) >> 3u32), p) % p;
    let vxx = &v * &x % p * &x % p;
    if vxx != u {
        if vxx == (p - &u) % p {
            x = x * &c.sqrt_m1 % p;
        } else {
            return None;
        }
    }
    if x.bit(0) != sign {
        x = (p - &x) % p;
    }
    let t = &x * &y % p;
    Some(Point {
        x,
        y,
        z: BigUint::one(),
        t,
    })
}

/// RFC 8032 verification, as Go's `ed25519.Verify` (the key is 32 bytes).
fn verify(key: &[u8; 32], msg: &[u8], sig: &[u8]) -> bool {
    let c = curve();
    let (Some(r), Some(s)) = (sig.get(..32), sig.get(32..)) else {
        return false;
    };
    if sig.len() != 64 {
        return false;
    }
    let s = BigUint::from_bytes_le(s);
    if s >= c.l {
        return false;
    }
    let Some(a) = decode(c, key) else {
        return false;
    };
    let mut h = sha2::Sha512::new();
    h.update(r);
    h.update(key);
    h.update(msg);
    let k = BigUint::from_bytes_le(&h.finalize()) % &c.l;
    let check = c.base.mul(&s, c).add(&a.neg(c).mul(&k, c), c);
    check.encode(c) == r
}

builtin! {
    /// `Valid(publicKey, message, signature)`: whether `signature` is `message` signed with the
    /// key's private key.
    fn valid(_, "ed25519.Valid", key: Bytes, msg: Bytes, sig: Bytes) {
        let Ok(key) = <[u8; 32]>::try_from(key.0) else {
            fail!("ed25519: publicKey must be 32 bytes");
        };
        Ok(Val::Bool(verify(&key, msg.0, sig.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        ::hex::decode(s).unwrap_or_default()
    }

    #[test]
    fn rfc8032_test_1() {
        // RFC 8032 section 7.1, TEST 1 (empty message).
        let key = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
        let sig = hex(concat!(
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555",
            "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        ));
        let key: [u8; 32] = key.try_into().unwrap_or([0; 32]);
        assert!(verify(&key, b"", &sig));
        // Any change of the message, the signature or its length fails.
        assert!(!verify(&key, b"x", &sig));
        let mut bad = sig.clone();
        bad[5] ^= 1;
        assert!(!verify(&key, b"", &bad));
        assert!(!verify(&key, b"", &sig[..63]));
        // A non-canonical S (S + L) is refused even though it is the same scalar.
        let c = curve();
        let s_plus_l = BigUint::from_bytes_le(&sig[32..]) + &c.l;
        let mut nc = sig[..32].to_vec();
        nc.extend_from_slice(&le32(&s_plus_l));
        assert!(!verify(&key, b"", &nc));
    }

    #[test]
    fn base_point_has_order_l() {
        let c = curve();
        assert_eq!(
            c.base.encode(c)[..4],
            [0x58, 0x66, 0x66, 0x66],
            "the base point encodes as 0x5866...66"
        );
        let o = c.base.mul(&c.l, c);
        assert_eq!(o.encode(c), Point::identity().encode(c));
    }
}
