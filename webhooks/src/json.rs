//! [`Json`]: the JSON value the rules read an object's `spec` as, borrowed from the review body.
//!
//! Rules:
//! - The data model and answers of `serde_json::Value` (as the workspace builds it, with
//!   `preserve_order`) for everything the rules ask: member lookup, members in document order, the
//!   last of duplicate members wins at the first one's position, object equality ignores member
//!   order, numbers are `serde_json::Number`, and `Display` is the same compact JSON.
//! - Cheaper to build on every review: strings and member names borrow the body unless they
//!   contain escapes, and an object of up to [`SMALL`] members is one vector searched linearly (no
//!   hashing, one allocation); a larger one is indexed by member name with foldhash, seeded per
//!   process, so crafted input cannot make lookups, duplicate checks or comparisons quadratic. A
//!   review's `spec` as a `serde_json::Value` (SipHash and two allocations per object, one per
//!   string) cost more than all the rules that read it.
//! - Built in one serde pass (with serde_json's nesting limit), or borrowed from a
//!   `serde_json::Value` ([`Json::from`], for the `AdmissionRequest` entry point).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use indexmap::IndexMap;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::{Number, Value};

/// Objects of up to this many members are searched linearly.
pub const SMALL: usize = 16;

/// An object's members, in document order, without duplicate names.
#[derive(Debug, Clone, Default)]
pub struct Members<'a>(Repr<'a>);

#[derive(Debug, Clone)]
enum Repr<'a> {
    Small(Vec<(Cow<'a, str>, Json<'a>)>),
    Large(IndexMap<Cow<'a, str>, Json<'a>, foldhash::fast::RandomState>),
}

impl Default for Repr<'_> {
    fn default() -> Self {
        Repr::Small(Vec::new())
    }
}

impl<'a> Members<'a> {
    /// The member `key`.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        match &self.0 {
            Repr::Small(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Repr::Large(map) => map.get(key),
        }
    }

    /// Adds a member; a repeated name replaces the value in the first one's place (as
    /// `serde_json`'s map does).
    pub fn insert(&mut self, key: Cow<'a, str>, value: Json<'a>) {
        match &mut self.0 {
            Repr::Small(entries) => {
                if let Some(slot) = entries.iter_mut().find(|(k, _)| *k == key) {
                    slot.1 = value;
                } else if entries.len() < SMALL {
                    entries.push((key, value));
                } else {
                    let mut map: IndexMap<_, _, _> = std::mem::take(entries).into_iter().collect();
                    map.insert(key, value);
                    self.0 = Repr::Large(map);
                }
            }
            Repr::Large(map) => {
                map.insert(key, value);
            }
        }
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Small(entries) => entries.len(),
            Repr::Large(map) => map.len(),
        }
    }

    /// Whether there is no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The members, in document order.
    pub fn iter(&self) -> Iter<'_, 'a> {
        Iter(match &self.0 {
            Repr::Small(entries) => IterRepr::Small(entries.iter()),
            Repr::Large(map) => IterRepr::Large(map.iter()),
        })
    }

    /// The member names, in document order.
    pub fn keys(&self) -> impl Iterator<Item = &Cow<'a, str>> {
        self.iter().map(|(k, _)| k)
    }

    /// The member values, in document order.
    pub fn values(&self) -> impl Iterator<Item = &Json<'a>> {
        self.iter().map(|(_, v)| v)
    }
}

/// Objects are equal when they have the same members, in any order.
impl PartialEq for Members<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<'a> FromIterator<(Cow<'a, str>, Json<'a>)> for Members<'a> {
    fn from_iter<I: IntoIterator<Item = (Cow<'a, str>, Json<'a>)>>(iter: I) -> Self {
        let mut members = Members::default();
        for (k, v) in iter {
            members.insert(k, v);
        }
        members
    }
}

/// The members of a [`Members`], in document order.
pub struct Iter<'m, 'a>(IterRepr<'m, 'a>);

enum IterRepr<'m, 'a> {
    Small(std::slice::Iter<'m, (Cow<'a, str>, Json<'a>)>),
    Large(indexmap::map::Iter<'m, Cow<'a, str>, Json<'a>>),
}

impl<'m, 'a> Iterator for Iter<'m, 'a> {
    type Item = (&'m Cow<'a, str>, &'m Json<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Small(entries) => entries.next().map(|(k, v)| (k, v)),
            IterRepr::Large(map) => map.next(),
        }
    }
}

impl<'m, 'a> IntoIterator for &'m Members<'a> {
    type Item = (&'m Cow<'a, str>, &'m Json<'a>);
    type IntoIter = Iter<'m, 'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A JSON value whose strings may borrow the text it was read from (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number(Number),
    /// A string.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<Json<'a>>),
    /// An object.
    Object(Members<'a>),
}

impl<'a> Json<'a> {
    /// The member `key` of an object (`None` for a missing member or a non-object).
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Object(members) => members.get(key),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The members, if this is an object.
    pub fn as_object(&self) -> Option<&Members<'a>> {
        match self {
            Json::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&Vec<Json<'a>>> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }
}

impl<'a> From<&'a Value> for Json<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.clone()),
            Value::String(s) => Json::String(Cow::Borrowed(s)),
            Value::Array(items) => Json::Array(items.iter().map(Json::from).collect()),
            Value::Object(members) => Json::Object(
                members
                    .iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::from(v)))
                    .collect(),
            ),
        }
    }
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(text) => s.serialize_str(text),
            Json::Array(items) => s.collect_seq(items),
            Json::Object(members) => s.collect_map(members.iter()),
        }
    }
}

/// Compact JSON, as `serde_json::Value` displays.
impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

/// A string borrowed from the text unless it has escapes (serde borrows a `Cow<str>` only as a
/// direct field; this newtype carries the borrow through `Option`, `Vec` and map keys).
#[derive(serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct Str<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Json<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor(PhantomData))
    }
}

struct JsonVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for JsonVisitor<'a> {
    type Value = Json<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json<'a>, E> {
        Ok(Json::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Json<'a>, E> {
        Ok(Json::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Json<'a>, E> {
        Ok(Json::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Json<'a>, E> {
        // As serde_json::Value: a non-finite float (never in JSON text) becomes null.
        Ok(Number::from_f64(n).map_or(Json::Null, Json::Number))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Json<'a>, E> {
        Ok(Json::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json<'a>, E> {
        Ok(Json::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Json<'a>, E> {
        Ok(Json::String(Cow::Owned(s)))
    }

    fn visit_unit<E>(self) -> Result<Json<'a>, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json<'a>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json<'a>, D::Error> {
        Json::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'a>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'a>, A::Error> {
        let mut members = Members::default();
        while let Some(Str(key)) = map.next_key()? {
            // Like serde_json's map: a repeated member replaces the value in the first one's place.
            let value = map.next_value()?;
            members.insert(key, value);
        }
        Ok(Json::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXTS: [&str; 6] = [
        r#"{"type":"k","registry":{"a@v1":{"version":"1.0.0","enable":false}},"n":[1,-2,3.5,null,true]}"#,
        r#"{"b":1,"a":2,"b":3}"#,
        r#"{"esc\"aped":"line\nbreak \u00e9"}"#,
        r#"[{"x":{}},[],"",0]"#,
        r#""text""#,
        "12345678901234567890",
    ];

    #[test]
    fn reads_and_prints_as_serde_json_value_does() {
        for text in TEXTS {
            let value: Value = serde_json::from_str(text).unwrap();
            let json: Json<'_> = serde_json::from_str(text).unwrap();
            assert_eq!(json.to_string(), value.to_string(), "{text}");
            assert_eq!(json, Json::from(&value), "{text}");
        }
    }

    #[test]
    fn lookups_and_equality_follow_serde_json_value() {
        let json: Json<'_> = serde_json::from_str(TEXTS[1]).unwrap();
        assert_eq!(
            json.get("b"),
            Some(&Json::Number(3.into())),
            "the last duplicate wins"
        );
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(|k| &**k).collect();
        assert_eq!(keys, ["b", "a"], "at the first one's place");
        // Past SMALL members the object is indexed; the same answers.
        let many = |order: &mut dyn Iterator<Item = usize>| {
            let members: Vec<String> = order.map(|i| format!("\"k{i}\":{i}")).collect();
            format!("{{{},\"k3\":-1}}", members.join(","))
        };
        let (up, down) = (many(&mut (0..40)), many(&mut (0..40).rev()));
        let (a, b): (Json<'_>, Json<'_>) = (
            serde_json::from_str(&up).unwrap(),
            serde_json::from_str(&down).unwrap(),
        );
        assert_eq!(a, b);
        assert_eq!(a.as_object().unwrap().len(), 40);
        assert_eq!(a.get("k3"), Some(&Json::Number((-1).into())));
        assert_eq!(
            a.to_string(),
            serde_json::from_str::<Value>(&up).unwrap().to_string()
        );
        let reordered: Json<'_> = serde_json::from_str(r#"{"a":2,"b":3}"#).unwrap();
        assert_eq!(json, reordered, "member order does not matter");
        assert_ne!(
            json,
            serde_json::from_str::<Json<'_>>(r#"{"a":2}"#).unwrap()
        );
        assert_eq!(json.get("a").and_then(Json::as_str), None);
        assert_eq!(Json::Null.get("a"), None);
    }

    #[test]
    fn strings_borrow_the_text_unless_escaped() {
        let json: Json<'_> = serde_json::from_str(r#"{"plain":"v","esc":"a\tb"}"#).unwrap();
        let members = json.as_object().unwrap();
        assert!(members.keys().all(|k| matches!(k, Cow::Borrowed(_))));
        assert!(matches!(
            members.get("plain"),
            Some(Json::String(Cow::Borrowed(_)))
        ));
        assert!(matches!(
            members.get("esc"),
            Some(Json::String(Cow::Owned(_)))
        ));
    }
}
