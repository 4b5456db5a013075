//! The workspace's YAML rules for typed documents (manifests, CRDs, kubeconfigs, values files),
//! on `serde-saphyr`:
//! - Reading is YAML 1.2 core, as Kubernetes (`sigs.k8s.io/yaml`) and CUE read it for these
//!   documents: only `true`/`True`/`TRUE` and `false`/`False`/`FALSE` are booleans (`yes`, `no`,
//!   `on`, `off`, `y`, `n` stay strings, so a ConfigMap's `enabled: yes` is not turned into a
//!   boolean); integers with leading zeros (`0755`, `08`) and with underscores (`1_000`) stay
//!   strings when the target is untyped (`serde_json::Value`); merge keys (`<<`) are applied;
//!   a duplicate key is an error.
//! - A stream is read document by document; an empty document (a bare `---`) reads as `null`.
//! - Writing is block style with two-space indentation; a multi-line string is a literal block
//!   (`|-`), a single-line one is never folded, so a description reads as it was written.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Errors of reading a YAML document.
pub type DeError = serde_saphyr::Error;
/// Errors of writing a YAML document.
pub type SerError = serde_saphyr::SerializeError;

/// The reading options (see the module doc).
pub fn read_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
    }
}

fn write_options() -> serde_saphyr::SerializerOptions {
    let mut o = serde_saphyr::SerializerOptions::default();
    // Multi-line strings as literal blocks (`|-`); single-line ones are never folded.
    o.folded_wrap_chars = usize::MAX;
    o
}

/// One YAML document into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, DeError> {
    serde_saphyr::from_str_with_options(text, read_options())
}

/// One YAML document (UTF-8 bytes) into `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DeError> {
    serde_saphyr::from_slice_with_options(bytes, read_options())
}

/// Every document of a YAML stream into `T`.
pub fn from_str_multiple<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, DeError> {
    serde_saphyr::from_str_multiple_with_options(text, read_options())
}

/// One value as a YAML document.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, SerError> {
    serde_saphyr::to_string_with_options(value, write_options())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn reads_yaml_1_2_core() {
        let v: Value =
            from_str("a: yes\nb: on\nc: 0755\nd: 1_000\ne: 0x1F\nf: True\ng: ~\n").unwrap();
        assert_eq!(
            v,
            json!({"a": "yes", "b": "on", "c": "0755", "d": "1_000", "e": 31, "f": true, "g": null})
        );
    }

    #[test]
    fn merge_keys_and_streams() {
        let v: Value = from_str("b: &b {x: 1, y: 0}\nm:\n  <<: *b\n  y: 2\n").unwrap();
        assert_eq!(v["m"], json!({"x": 1, "y": 2}));
        let docs: Vec<Value> = from_str_multiple("a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), json!({"b": 2})]);
        assert!(from_str::<Value>("a: 1\na: 2\n").is_err());
    }

    #[test]
    fn writes_plain_long_strings_and_round_trips() {
        let long = "word ".repeat(40).trim_end().to_owned();
        let v = json!({"d": long, "yes": "no", "n": "0755", "l": [1, "2"], "e": {}, "m": "a\nb"});
        let text = to_string(&v).unwrap();
        assert!(text.contains(&format!("d: {long}\n")), "{text}");
        assert_eq!(from_str::<Value>(&text).unwrap(), v, "{text}");
    }
}
