//! Package identity (docs/design/operator.md §5.4): the key of a generated platform package.
//!
//! Rules implemented here:
//! - An identity is `(generation, canonical claims)`. The canonical claims string is the sorted,
//!   de-duplicated list of `"<catalog>@<version>"` of the active claims, comma-joined.
//! - Its string form is `gen-<N>` with no claims, else `gen-<N>-<hex of the first 8 bytes of
//!   sha256(claims)>` (16 lowercase hex digits). The same inputs always give the same string.
//! - The generation is a Kubernetes `metadata.generation` and must be positive, so the zero identity
//!   (generation 0) is never carried by a package.
//! - The identity *is* the pair `(generation, digest)`: two claim sets whose digests agree in all 64
//!   bits are the same identity (a collision has probability 2^-64 per pair and is accepted, as
//!   upstream does). Because the string is a bijective encoding of that pair, the map from identity to
//!   directory name is injective, and [`PackageIdentity::parse`] accepts only canonical strings
//!   (no leading zeros, lowercase hex), so the map back is injective too.
//! - The string contains only `[a-z0-9-]` and starts with `gen-`: it is always a single safe path
//!   component (never empty, `.`, `..`, dot-prefixed or containing a separator).
//! - Claims are validated so that the comma-join is unambiguous: catalog and version are non-empty
//!   and contain no `,`; the version contains no `@` (catalog paths may carry a major-version `@vN`).
//! - Ordering is by generation, then digest (the claim-less identity of a generation first).

use std::collections::BTreeSet;
use std::fmt;

use sha2::{Digest, Sha256};

use super::Error;

/// The identity of one generated platform package: dir name, lease key and store key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackageIdentity {
    generation: i64,
    claims_digest: Option<[u8; 8]>,
}

impl PackageIdentity {
    /// Builds the identity of the package generated for `generation` with the given active claims
    /// (`(catalog, version)` pairs, in any order, duplicates allowed).
    pub fn new<I, C, V>(generation: i64, claims: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = (C, V)>,
        C: AsRef<str>,
        V: AsRef<str>,
    {
        if generation < 1 {
            return Err(Error::InvalidGeneration(generation));
        }
        let mut canonical = BTreeSet::new();
        for (catalog, version) in claims {
            let (catalog, version) = (catalog.as_ref(), version.as_ref());
            let claim = format!("{catalog}@{version}");
            let reason = if catalog.is_empty() {
                Some("the catalog is empty")
            } else if version.is_empty() {
                Some("the version is empty")
            } else if catalog.contains(',') || version.contains(',') {
                Some("a claim may not contain ','")
            } else if version.contains('@') {
                Some("a version may not contain '@'")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(Error::InvalidClaim { claim, reason });
            }
            canonical.insert(claim);
        }
        if canonical.is_empty() {
            return Ok(Self::unclaimed_unchecked(generation));
        }
        let joined = canonical.into_iter().collect::<Vec<_>>().join(",");
        let hash = Sha256::digest(joined.as_bytes());
        let mut digest = [0u8; 8];
        digest.copy_from_slice(&hash[..8]);
        Ok(Self {
            generation,
            claims_digest: Some(digest),
        })
    }

    /// The identity of `generation` with no active claims (`gen-<N>`).
    pub fn unclaimed(generation: i64) -> Result<Self, Error> {
        if generation < 1 {
            return Err(Error::InvalidGeneration(generation));
        }
        Ok(Self::unclaimed_unchecked(generation))
    }

    fn unclaimed_unchecked(generation: i64) -> Self {
        Self {
            generation,
            claims_digest: None,
        }
    }

    /// The Platform generation the package was generated for.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// Whether any claim contributed to the package.
    pub fn has_claims(&self) -> bool {
        self.claims_digest.is_some()
    }

    /// Parses a canonical identity string (a directory name). Anything else — leading zeros,
    /// uppercase hex, a digest of the wrong length, a non-positive generation — is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("gen-")?;
        let (number, digest) = match rest.split_once('-') {
            Some((number, digest)) => (number, Some(digest)),
            None => (rest, None),
        };
        let canonical_number = !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit())
            && !number.starts_with('0');
        if !canonical_number {
            return None;
        }
        let generation: i64 = number.parse().ok()?;
        let claims_digest = match digest {
            None => None,
            Some(hex) => Some(parse_hex8(hex)?),
        };
        Some(Self {
            generation,
            claims_digest,
        })
    }
}

fn parse_hex8(hex: &str) -> Option<[u8; 8]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 16 {
        return None;
    }
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 8];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

impl fmt::Display for PackageIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gen-{}", self.generation)?;
        if let Some(digest) = &self.claims_digest {
            f.write_str("-")?;
            for b in digest {
                write!(f, "{b:02x}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: [(&str, &str); 0] = [];

    #[test]
    fn spec_5_4_no_claims_is_gen_n() {
        let id = PackageIdentity::new(7, NONE).unwrap();
        assert_eq!(id.to_string(), "gen-7");
        assert_eq!(id, PackageIdentity::unclaimed(7).unwrap());
        assert!(!id.has_claims());
    }

    #[test]
    fn spec_5_4_claims_hash_first_8_bytes_of_sha256_of_sorted_joined_claims() {
        let id = PackageIdentity::new(3, [("b.dev/cat", "1.0.0"), ("a.dev/cat", "0.2.0")]).unwrap();
        let hash = Sha256::digest(b"a.dev/cat@0.2.0,b.dev/cat@1.0.0");
        let want: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(id.to_string(), format!("gen-3-{want}"));
        assert!(id.has_claims());
    }

    #[test]
    fn spec_5_4_same_inputs_same_string_order_and_duplicates_ignored() {
        let a = PackageIdentity::new(3, [("x", "1"), ("y", "2"), ("x", "1")]).unwrap();
        let b = PackageIdentity::new(3, [("y", "2"), ("x", "1")]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), b.to_string());
    }

    #[test]
    fn spec_5_4_different_claims_or_generation_differ() {
        let a = PackageIdentity::new(3, [("x", "1")]).unwrap();
        let b = PackageIdentity::new(3, [("x", "2")]).unwrap();
        let c = PackageIdentity::new(4, [("x", "1")]).unwrap();
        let d = PackageIdentity::unclaimed(3).unwrap();
        let all = [a, b, c, d];
        for (i, p) in all.iter().enumerate() {
            for q in &all[i + 1..] {
                assert_ne!(p, q);
                assert_ne!(p.to_string(), q.to_string());
            }
        }
    }

    #[test]
    fn spec_5_4_zero_identity_never_carried() {
        assert!(matches!(
            PackageIdentity::new(0, NONE),
            Err(Error::InvalidGeneration(0))
        ));
        assert!(matches!(
            PackageIdentity::unclaimed(-1),
            Err(Error::InvalidGeneration(-1))
        ));
        assert!(PackageIdentity::parse("gen-0").is_none());
    }

    #[test]
    fn claims_that_would_make_the_join_ambiguous_are_refused() {
        for (catalog, version) in [
            ("", "1"),
            ("a", ""),
            ("a,b", "1"),
            ("a", "1,2"),
            ("a", "1@2"),
        ] {
            let err = PackageIdentity::new(1, [(catalog, version)]).unwrap_err();
            assert!(
                matches!(err, Error::InvalidClaim { .. }),
                "{catalog}@{version}"
            );
        }
        // A major-version suffix on the catalog path is allowed.
        assert!(PackageIdentity::new(1, [("opmodel.dev/cat@v1", "1.2.3")]).is_ok());
    }

    #[test]
    fn parse_round_trips_and_accepts_only_canonical_names() {
        for id in [
            PackageIdentity::unclaimed(1).unwrap(),
            PackageIdentity::unclaimed(i64::MAX).unwrap(),
            PackageIdentity::new(12, [("c", "1")]).unwrap(),
        ] {
            assert_eq!(PackageIdentity::parse(&id.to_string()), Some(id));
        }
        for bad in [
            "gen-",
            "gen-01",
            "gen--1",
            "gen-+1",
            "gen-1-",
            "gen-1-ABCDEF0123456789",
            "gen-1-abcdef012345678",
            "gen-1-abcdef01234567890",
            "gen-1-abcdef0123456789-x",
            "gen-99999999999999999999",
            "Gen-1",
            ".staging-gen-1-abcdefabcdef",
            "gen-1 ",
        ] {
            assert_eq!(PackageIdentity::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names_are_single_safe_path_components() {
        let id = PackageIdentity::new(5, [("a/b/../c", "1.0.0")]).unwrap();
        let name = id.to_string();
        assert!(name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        assert_eq!(std::path::Path::new(&name).components().count(), 1);
    }

    #[test]
    fn ordering_is_generation_then_digest_unclaimed_first() {
        let u2 = PackageIdentity::unclaimed(2).unwrap();
        let c2 = PackageIdentity::new(2, [("x", "1")]).unwrap();
        let u10 = PackageIdentity::unclaimed(10).unwrap();
        let mut v = vec![u10, c2, u2];
        v.sort();
        assert_eq!(v, vec![u2, c2, u10]);
    }
}
