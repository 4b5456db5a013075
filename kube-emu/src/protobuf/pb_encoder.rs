//! A protobuf encoder for tests and the decode benchmark: messages built field by field
//! (`varint` / length-delimited wire types only, which is all the request bodies under test
//! need). Compiled only into the unit tests and, through `#[path]`, the `protobuf` bench.

#![allow(dead_code)]

/// A protobuf message under construction.
#[derive(Default)]
pub(crate) struct Pb(pub(crate) Vec<u8>);

impl Pb {
    pub(crate) fn varint(&mut self, mut n: u64) -> &mut Self {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.0.push(b);
                return self;
            }
            self.0.push(b | 0x80);
        }
    }
    pub(crate) fn int(&mut self, f: u64, n: u64) -> &mut Self {
        self.varint(f << 3).varint(n)
    }
    pub(crate) fn bytes(&mut self, f: u64, b: &[u8]) -> &mut Self {
        self.varint(f << 3 | 2).varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    pub(crate) fn str(&mut self, f: u64, s: &str) -> &mut Self {
        self.bytes(f, s.as_bytes())
    }
    pub(crate) fn msg(&mut self, f: u64, m: &Pb) -> &mut Self {
        self.bytes(f, &m.0)
    }
}
