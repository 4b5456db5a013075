//! Package `net` (upstream `pkg/net`): IP address and CIDR predicates and arithmetic (Go's
//! `net/netip` semantics), host/port splitting, FQDN and URL checks, and URL escaping.
//!
//! Rules:
//! - An IP argument is a string (`"10.0.0.1"`, `"2001:db8::1"`, `"fe80::1%eth0"`), bytes holding
//!   such text, or a list of 4 or 16 byte values. IPv4 text is strict dotted decimal (no leading
//!   zeros); an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, or a 16-byte list) is IPv6, not IPv4,
//!   as in `netip`. Addresses print in `netip`'s canonical form (RFC 5952 for IPv6, mapped
//!   addresses as `::ffff:1.2.3.4`).
//! - Validators (`IP`, `IPv4`, `IPv6`, `IPCIDR`, `FQDN`, `URL`, `AbsURL`, `InCIDR`, `LoopbackIP`,
//!   and the other address-class predicates) return `false` for a non-matching value, except
//!   `IPCIDR`, `URL` and `AbsURL`, which fail with the parse error as upstream does.
//! - `AddIP` adds an integer to an address (keeping a `/bits` suffix); `AddIPCIDR` adds
//!   `offset << (bits of host part)` to a prefix; leaving the address range is an error.
//! - `ParseCIDR` gives `{prefix_mask, prefix_len, prefix_addr, broadcast_addr}` (the broadcast
//!   address only for IPv4).
//! - `FQDN` applies the IDNA "strict domain name" checks for ASCII input: labels of 1–63 letters,
//!   digits and hyphens, not starting or ending with a hyphen, at most 253 characters (a final
//!   dot is allowed).
//! - `URL` approximates Go's `url.Parse`: it rejects ASCII control characters, malformed `%`
//!   escapes and a missing scheme before `:`; `AbsURL` also requires a scheme.

use super::args::{builtin, fail};
use super::{no_consts, Builtin, BuiltinError, Package, Val};
use num_bigint::{BigInt, Sign};
use num_traits::{Signed, ToPrimitive};
use std::net::{Ipv4Addr, Ipv6Addr};

const P: &str = "net";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: |name| match name {
        "IPv4len" => Some(Val::Int(4.into())),
        "IPv6len" => Some(Val::Int(16.into())),
        _ => no_consts(name),
    },
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "SplitHostPort", 1, split_host_port),
    Builtin::f(P, "JoinHostPort", 2, join_host_port),
    Builtin::v(P, "FQDN", 1, fqdn),
    Builtin::f(P, "ParseIP", 1, parse_ip),
    Builtin::v(P, "IPv4", 1, ipv4),
    Builtin::v(P, "IPv6", 1, ipv6),
    Builtin::v(P, "IP", 1, ip),
    Builtin::v(P, "IPCIDR", 1, ipcidr),
    Builtin::v(P, "LoopbackIP", 1, loopback_ip),
    Builtin::v(P, "MulticastIP", 1, multicast_ip),
    Builtin::v(
        P,
        "InterfaceLocalMulticastIP",
        1,
        interface_local_multicast_ip,
    ),
    Builtin::v(P, "LinkLocalMulticastIP", 1, link_local_multicast_ip),
    Builtin::v(P, "LinkLocalUnicastIP", 1, link_local_unicast_ip),
    Builtin::v(P, "GlobalUnicastIP", 1, global_unicast_ip),
    Builtin::v(P, "UnspecifiedIP", 1, unspecified_ip),
    Builtin::f(P, "ToIP4", 1, to_ip4),
    Builtin::f(P, "ToIP16", 1, to_ip16),
    Builtin::f(P, "IPString", 1, ip_string),
    Builtin::f(P, "AddIP", 2, add_ip),
    Builtin::f(P, "AddIPCIDR", 2, add_ip_cidr),
    Builtin::f(P, "ParseCIDR", 1, parse_cidr),
    Builtin::v(P, "InCIDR", 2, in_cidr),
    Builtin::f(P, "CompareIP", 2, compare_ip),
    Builtin::f(P, "PathEscape", 1, path_escape),
    Builtin::f(P, "PathUnescape", 1, path_unescape),
    Builtin::f(P, "QueryEscape", 1, query_escape),
    Builtin::f(P, "QueryUnescape", 1, query_unescape),
    Builtin::v(P, "URL", 1, url),
    Builtin::v(P, "AbsURL", 1, abs_url),
];

/// A `netip.Addr`: 4 or 16 bytes and an optional IPv6 zone.
#[derive(Clone, Debug, PartialEq)]
struct Addr {
    bytes: Vec<u8>,
    zone: String,
}

impl Addr {
    fn is4(&self) -> bool {
        self.bytes.len() == 4
    }

    fn unmap(&self) -> Addr {
        if self.bytes.len() == 16
            && self.bytes[..10].iter().all(|&b| b == 0)
            && self.bytes[10] == 0xff
            && self.bytes[11] == 0xff
        {
            Addr {
                bytes: self.bytes[12..].to_vec(),
                zone: String::new(),
            }
        } else {
            self.clone()
        }
    }

    fn text(&self) -> String {
        if let Ok(b) = <[u8; 4]>::try_from(self.bytes.as_slice()) {
            return Ipv4Addr::from(b).to_string();
        }
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.bytes);
        let mut s = Ipv6Addr::from(b).to_string();
        if !self.zone.is_empty() {
            s.push('%');
            s.push_str(&self.zone);
        }
        s
    }

    fn bits(&self) -> u32 {
        self.bytes.len() as u32 * 8
    }
}

fn parse_addr_text(s: &str) -> Result<Addr, String> {
    if s.contains(':') {
        let (body, zone) = match s.split_once('%') {
            Some((b, z)) if !z.is_empty() => (b, z),
            Some(_) => return Err(format!("ParseAddr({s:?}): zone must be a non-empty string")),
            None => (s, ""),
        };
        let a: Ipv6Addr = body
            .parse()
            .map_err(|_| format!("ParseAddr({s:?}): invalid IPv6 address"))?;
        return Ok(Addr {
            bytes: a.octets().to_vec(),
            zone: zone.to_string(),
        });
    }
    let a: Ipv4Addr = s
        .parse()
        .map_err(|_| format!("ParseAddr({s:?}): invalid IPv4 address"))?;
    Ok(Addr {
        bytes: a.octets().to_vec(),
        zone: String::new(),
    })
}

/// upstream's `netGetIP`: `None` for anything that is not an address.
fn get_ip(v: &Val) -> Option<Addr> {
    match v {
        Val::String(s) => parse_addr_text(s).ok(),
        Val::Bytes(b) => parse_addr_text(std::str::from_utf8(b).ok()?).ok(),
        Val::List(items) => {
            let bytes = items
                .iter()
                .map(|i| match i {
                    Val::Int(n) => n.to_u8(),
                    _ => None,
                })
                .collect::<Option<Vec<u8>>>()?;
            (bytes.len() == 4 || bytes.len() == 16).then_some(Addr {
                bytes,
                zone: String::new(),
            })
        }
        _ => None,
    }
}

fn show(v: &Val) -> String {
    match v {
        Val::String(s) => s.clone(),
        other => super::json::to_json(other).unwrap_or_else(|_| "_".into()),
    }
}

fn need_ip(v: &Val) -> Result<Addr, BuiltinError> {
    if let Val::Opaque(_) = v {
        return Err(BuiltinError::incomplete("non-concrete IP address"));
    }
    get_ip(v).ok_or_else(|| BuiltinError::new(format!("invalid IP {:?}", show(v))))
}

/// A `netip.Prefix`.
struct Prefix {
    addr: Addr,
    bits: u32,
}

impl Prefix {
    fn masked(&self) -> Addr {
        let mut bytes = self.addr.bytes.clone();
        for (i, b) in bytes.iter_mut().enumerate() {
            let start = i as u32 * 8;
            if start >= self.bits {
                *b = 0;
            } else if start + 8 > self.bits {
                *b &= !(0xFFu8 >> (self.bits - start));
            }
        }
        Addr {
            bytes,
            zone: String::new(),
        }
    }

    fn text(&self) -> String {
        format!("{}/{}", self.addr.text(), self.bits)
    }
}

fn parse_prefix(s: &str) -> Result<Prefix, String> {
    let Some((a, b)) = s.rsplit_once('/') else {
        return Err(format!("netip.ParsePrefix({s:?}): no '/'"));
    };
    let addr = parse_addr_text(a).map_err(|e| format!("netip.ParsePrefix({s:?}): {e}"))?;
    if !addr.zone.is_empty() {
        return Err(format!(
            "netip.ParsePrefix({s:?}): IPv6 zones cannot be present in a prefix"
        ));
    }
    let ok_digits = !b.is_empty()
        && b.bytes().all(|c| c.is_ascii_digit())
        && !(b.len() > 1 && b.starts_with('0'));
    let bits: u32 = if ok_digits {
        b.parse().unwrap_or(u32::MAX)
    } else {
        u32::MAX
    };
    if bits > addr.bits() {
        return Err(format!(
            "netip.ParsePrefix({s:?}): bad bits after slash: {b:?}"
        ));
    }
    Ok(Prefix { addr, bits })
}

/// upstream's `netGetIPCIDR`: `Ok(None)` for a value that is neither string nor bytes.
fn get_prefix(v: &Val) -> Result<Option<Prefix>, BuiltinError> {
    let text = match v {
        Val::String(s) => s.as_str(),
        Val::Bytes(b) => {
            std::str::from_utf8(b).map_err(|_| BuiltinError::new("invalid CIDR bytes"))?
        }
        Val::Opaque(_) => return Err(BuiltinError::incomplete("non-concrete CIDR")),
        _ => return Ok(None),
    };
    parse_prefix(text).map(Some).map_err(BuiltinError::new)
}

fn bytes_list(b: &[u8]) -> Val {
    Val::List(b.iter().map(|&x| Val::Int(x.into())).collect())
}

fn pred(v: &Val, f: impl Fn(&Addr) -> bool) -> Result<Val, BuiltinError> {
    if let Val::Opaque(_) = v {
        return Err(BuiltinError::incomplete("non-concrete IP address"));
    }
    Ok(Val::Bool(get_ip(v).is_some_and(|a| f(&a))))
}

builtin! {
    /// `IPv4("23.23.23.23")` → `true`; `IPv4("2001:db8::1")` → `false`.
    fn ipv4(_, "net.IPv4", x: &Val) {
        pred(x, Addr::is4)
    }
}

builtin! {
    /// `IPv6("2001:db8::1")` → `true`; `IPv6("2001:db8::1234567")` → `false`.
    fn ipv6(_, "net.IPv6", x: &Val) {
        pred(x, |a| !a.is4())
    }
}

builtin! {
    /// `IP("0:0:0:0:0:0:23.23.23.23")` → `true`; `IP([1, 2, 3])` → `false`.
    fn ip(_, "net.IP", x: &Val) {
        pred(x, |_| true)
    }
}

builtin! {
    /// `IPCIDR("192.168.1.0/24")` → `true`; `IPCIDR("172.16.12.3")` is an error.
    fn ipcidr(_, "net.IPCIDR", x: &Val) {
        match get_prefix(x)? {
            Some(_) => Ok(Val::Bool(true)),
            None => Ok(Val::Bool(false)),
        }
    }
}

builtin! {
    /// `LoopbackIP([127, 0, 0, 1])` → `true`.
    fn loopback_ip(_, "net.LoopbackIP", x: &Val) {
        pred(x, |a| {
            let a = a.unmap();
            if a.is4() { a.bytes[0] == 127 } else { a.bytes[..15].iter().all(|&b| b == 0) && a.bytes[15] == 1 }
        })
    }
}

builtin! {
    /// `MulticastIP("224.0.0.1")` → `true`.
    fn multicast_ip(_, "net.MulticastIP", x: &Val) {
        pred(x, |a| {
            let a = a.unmap();
            if a.is4() { a.bytes[0] & 0xf0 == 0xe0 } else { a.bytes[0] == 0xff }
        })
    }
}

builtin! {
    /// `InterfaceLocalMulticastIP("ff01::1")` → `true`.
    fn interface_local_multicast_ip(_, "net.InterfaceLocalMulticastIP", x: &Val) {
        pred(x, |a| !a.is4() && a.bytes[0] == 0xff && a.bytes[1] & 0x0f == 0x01)
    }
}

builtin! {
    /// `LinkLocalMulticastIP("224.0.0.251")` → `true`.
    fn link_local_multicast_ip(_, "net.LinkLocalMulticastIP", x: &Val) {
        pred(x, |a| {
            let a = a.unmap();
            if a.is4() { a.bytes[..3] == [224, 0, 0] } else { a.bytes[0] == 0xff && a.bytes[1] & 0x0f == 0x02 }
        })
    }
}

builtin! {
    /// `LinkLocalUnicastIP("169.254.1.1")` → `true`.
    fn link_local_unicast_ip(_, "net.LinkLocalUnicastIP", x: &Val) {
        pred(x, |a| {
            let a = a.unmap();
            if a.is4() { a.bytes[..2] == [169, 254] } else { a.bytes[0] == 0xfe && a.bytes[1] & 0xc0 == 0x80 }
        })
    }
}

builtin! {
    /// `GlobalUnicastIP("8.8.8.8")` → `true`; `GlobalUnicastIP("255.255.255.255")` → `false`.
    fn global_unicast_ip(_, "net.GlobalUnicastIP", x: &Val) {
        pred(x, |a| {
            let a = a.unmap();
            let zero = a.bytes.iter().all(|&b| b == 0);
            if a.is4() {
                !zero && a.bytes != [255, 255, 255, 255] && a.bytes[0] != 127 && a.bytes[0] & 0xf0 != 0xe0 && a.bytes[..2] != [169, 254]
            } else {
                let loopback = a.bytes[..15].iter().all(|&b| b == 0) && a.bytes[15] == 1;
                let link_local = a.bytes[0] == 0xfe && a.bytes[1] & 0xc0 == 0x80;
                !(zero || loopback || a.bytes[0] == 0xff || link_local)
            }
        })
    }
}

builtin! {
    /// `UnspecifiedIP("::")` → `true`.
    fn unspecified_ip(_, "net.UnspecifiedIP", x: &Val) {
        pred(x, |a| a.bytes.iter().all(|&b| b == 0))
    }
}

builtin! {
    /// `ParseIP("10.0.0.1")` → `[10, 0, 0, 1]`.
    fn parse_ip(_, "net.ParseIP", s: &str) {
        let a = parse_addr_text(s).map_err(|_| BuiltinError::new(format!("invalid IP address {s:?}")))?;
        Ok(bytes_list(&a.bytes))
    }
}

builtin! {
    /// `ToIP4("127.0.0.1")` → `[127, 0, 0, 1]`.
    fn to_ip4(_, "net.ToIP4", x: &Val) {
        let a = need_ip(x)?;
        if !a.is4() {
            fail!("cannot convert {:?} to IPv4", a.text());
        }
        Ok(bytes_list(&a.bytes))
    }
}

builtin! {
    /// `ToIP16("127.0.0.1")` → `[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 0, 0, 1]`.
    fn to_ip16(_, "net.ToIP16", x: &Val) {
        let a = need_ip(x)?;
        if a.is4() {
            let mut b = vec![0u8; 10];
            b.extend_from_slice(&[255, 255]);
            b.extend_from_slice(&a.bytes);
            return Ok(bytes_list(&b));
        }
        Ok(bytes_list(&a.bytes))
    }
}

builtin! {
    /// `IPString([10, 0, 0, 1])` → `"10.0.0.1"`.
    fn ip_string(_, "net.IPString", x: &Val) {
        Ok(Val::String(need_ip(x)?.text()))
    }
}

fn ip_add(a: &Addr, offset: &BigInt) -> Result<Addr, BuiltinError> {
    let i = BigInt::from_bytes_be(Sign::Plus, &a.bytes) + offset;
    if i.is_negative() {
        fail!("IP address arithmetic resulted in out-of-range address (underflow)");
    }
    let (_, b) = i.to_bytes_be();
    let b = if i.sign() == Sign::NoSign {
        Vec::new()
    } else {
        b
    };
    let size = a.bytes.len();
    if b.len() > size {
        fail!("IP address arithmetic resulted in out-of-range address (overflow)");
    }
    let mut bytes = vec![0u8; size - b.len()];
    bytes.extend_from_slice(&b);
    Ok(Addr {
        bytes,
        zone: a.zone.clone(),
    })
}

builtin! {
    /// `AddIP("127.0.0.1", 1)` → `"127.0.0.2"`; `AddIP("127.0.0.1/8", 2)` → `"127.0.0.3/8"`.
    fn add_ip(_, "net.AddIP", x: &Val, offset: &BigInt) {
        if let Ok(Some(p)) = get_prefix(x) {
            let addr = ip_add(&p.addr, offset)?;
            return Ok(Val::String(Prefix { addr, bits: p.bits }.text()));
        }
        let a = need_ip(x)?;
        Ok(Val::String(ip_add(&a, offset)?.text()))
    }
}

builtin! {
    /// `AddIPCIDR("192.168.0.0/23", 1)` → `"192.168.2.0/23"`.
    fn add_ip_cidr(_, "net.AddIPCIDR", x: &Val, offset: &BigInt) {
        let Some(p) = get_prefix(x)? else {
            fail!("invalid CIDR {:?}", show(x));
        };
        let shift = usize::try_from(p.addr.bits() - p.bits).unwrap_or(0);
        let shifted = offset << shift;
        let addr = ip_add(&p.addr, &shifted)?;
        Ok(Val::String(Prefix { addr, bits: p.bits }.text()))
    }
}

builtin! {
    /// `ParseCIDR("10.20.30.40/24")` → `{prefix_mask: "255.255.255.0", prefix_len: 24,
    /// prefix_addr: "10.20.30.0", broadcast_addr: "10.20.30.255"}`.
    fn parse_cidr(_, "net.ParseCIDR", s: &str) {
        let p = parse_prefix(s).map_err(BuiltinError::new)?;
        let n = p.addr.bytes.len();
        let mut mask = vec![0u8; n];
        for (i, m) in mask.iter_mut().enumerate() {
            let start = i as u32 * 8;
            if start + 8 <= p.bits {
                *m = 0xff;
            } else if start < p.bits {
                *m = !(0xFFu8 >> (p.bits - start));
            }
        }
        let network = p.masked();
        let mut fields = vec![
            ("prefix_mask".to_string(), Val::String(Addr { bytes: mask.clone(), zone: String::new() }.text())),
            ("prefix_len".to_string(), Val::Int(p.bits.into())),
            ("prefix_addr".to_string(), Val::String(network.text())),
        ];
        if p.addr.is4() {
            let bc: Vec<u8> = network.bytes.iter().zip(&mask).map(|(b, m)| b | !m).collect();
            fields.push(("broadcast_addr".to_string(), Val::String(Addr { bytes: bc, zone: String::new() }.text())));
        }
        Ok(Val::Struct(fields))
    }
}

builtin! {
    /// `InCIDR("192.168.1.5", "192.168.1.0/24")` → `true`; as a validator,
    /// `net.InCIDR("10.0.0.0/8")`.
    fn in_cidr(_, "net.InCIDR", x: &Val, cidr: &Val) {
        let a = need_ip(x)?;
        let Some(p) = get_prefix(cidr)? else {
            fail!("invalid CIDR {:?}", show(cidr));
        };
        let contains = a.zone.is_empty()
            && a.bytes.len() == p.addr.bytes.len()
            && Prefix { addr: a, bits: p.bits }.masked() == p.masked();
        Ok(Val::Bool(contains))
    }
}

builtin! {
    /// `CompareIP("10.0.0.1", "10.0.0.2")` → `-1`; IPv4 sorts before IPv6.
    fn compare_ip(_, "net.CompareIP", a: &Val, b: &Val) {
        let (a, b) = (need_ip(a)?, need_ip(b)?);
        let ord = (a.bytes.len(), &a.bytes, &a.zone).cmp(&(b.bytes.len(), &b.bytes, &b.zone));
        Ok(Val::Int((ord as i8).into()))
    }
}

builtin! {
    /// `SplitHostPort("[::%lo0]:80")` → `["::%lo0", "80"]`.
    fn split_host_port(_, "net.SplitHostPort", s: &str) {
        let err = |why: &str| BuiltinError::new(format!("address {s}: {why}"));
        let Some(i) = s.rfind(':') else {
            return Err(err("missing port in address"));
        };
        let (host, j, k);
        if s.starts_with('[') {
            let Some(end) = s.find(']') else {
                return Err(err("missing ']' in address"));
            };
            if end + 1 == s.len() {
                return Err(err("missing port in address"));
            } else if end + 1 != i {
                if s.as_bytes()[end + 1] == b':' {
                    return Err(err("too many colons in address"));
                }
                return Err(err("missing port in address"));
            }
            host = &s[1..end];
            j = 1;
            k = end + 1;
        } else {
            host = &s[..i];
            if host.contains(':') {
                return Err(err("too many colons in address"));
            }
            j = 0;
            k = 0;
        }
        if s[j..].contains('[') {
            return Err(err("unexpected '[' in address"));
        }
        if s[k..].contains(']') {
            return Err(err("unexpected ']' in address"));
        }
        Ok(Val::List(vec![Val::String(host.to_string()), Val::String(s[i + 1..].to_string())]))
    }
}

builtin! {
    /// `JoinHostPort("2001:db8::1", 80)` → `"[2001:db8::1]:80"`; the host may be a byte list.
    fn join_host_port(_, "net.JoinHostPort", host: &Val, port: &Val) {
        let h = match host {
            Val::List(_) => match get_ip(host) {
                Some(a) => a.text(),
                None => fail!("invalid host {}", show(host)),
            },
            Val::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            Val::String(s) => s.clone(),
            other => fail!("invalid argument 0 to net.JoinHostPort: expected string, found {}", super::args::kind_name(other)),
        };
        let p = match port {
            Val::String(s) => s.clone(),
            Val::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            Val::Int(i) => i.to_string(),
            other => fail!("invalid argument 1 to net.JoinHostPort: expected int or string, found {}", super::args::kind_name(other)),
        };
        Ok(Val::String(if h.contains(':') { format!("[{h}]:{p}") } else { format!("{h}:{p}") }))
    }
}

builtin! {
    /// `FQDN("foo.bar.")` → `true`; a label longer than 63 characters → `false`.
    fn fqdn(_, "net.FQDN", s: &str) {
        let body = s.strip_suffix('.').unwrap_or(s);
        let ok = s.is_ascii()
            && !body.is_empty()
            && body.len() <= 253
            && body.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        Ok(Val::Bool(ok))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    PathSegment,
    Query,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'~') {
        return false;
    }
    match c {
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::PathSegment => matches!(c, b'/' | b';' | b',' | b'?'),
            Mode::Query => true,
        },
        _ => true,
    }
}

fn escape(s: &str, mode: Mode) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c == b' ' && mode == Mode::Query {
            out.push('+');
        } else if should_escape(c, mode) {
            out.push('%');
            out.push(HEX[(c >> 4) as usize] as char);
            out.push(HEX[(c & 15) as usize] as char);
        } else {
            out.push(c as char);
        }
    }
    out
}

fn unescape(s: &str, mode: Mode) -> Result<String, BuiltinError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                let Some(h) = hex else {
                    let bad: String = s[i..].chars().take(3).collect();
                    fail!("invalid URL escape {bad:?}");
                };
                out.push(
                    u8::from_str_radix(std::str::from_utf8(h).unwrap_or("00"), 16).unwrap_or(0),
                );
                i += 3;
            }
            b'+' if mode == Mode::Query => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| BuiltinError::new("unescaped text is not valid UTF-8"))
}

builtin! {
    /// `PathEscape("foo/bar")` → `"foo%2Fbar"`.
    fn path_escape(_, "net.PathEscape", s: &str) {
        Ok(Val::String(escape(s, Mode::PathSegment)))
    }
}

builtin! {
    /// `PathUnescape("foo%2Fbar")` → `"foo/bar"`.
    fn path_unescape(_, "net.PathUnescape", s: &str) {
        Ok(Val::String(unescape(s, Mode::PathSegment)?))
    }
}

builtin! {
    /// `QueryEscape("f%o b")` → `"f%25o+b"`.
    fn query_escape(_, "net.QueryEscape", s: &str) {
        Ok(Val::String(escape(s, Mode::Query)))
    }
}

builtin! {
    /// `QueryUnescape("f%25o+b")` → `"f%o b"`.
    fn query_unescape(_, "net.QueryUnescape", s: &str) {
        Ok(Val::String(unescape(s, Mode::Query)?))
    }
}

/// An approximation of Go's `url.Parse`; returns whether the URL has a scheme.
fn parse_url(s: &str) -> Result<bool, BuiltinError> {
    if s.bytes().any(|c| c < 0x20 || c == 0x7f) {
        fail!("parse {s:?}: net/url: invalid control character in URL");
    }
    let mut i = 0;
    let b = s.as_bytes();
    while i < b.len() {
        if b[i] == b'%' {
            if !b
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
            {
                let bad: String = s[i..].chars().take(3).collect();
                fail!("parse {s:?}: invalid URL escape {bad:?}");
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    let before_fragment = s.split('#').next().unwrap_or("");
    match before_fragment.find(':') {
        Some(0) => fail!("parse {s:?}: missing protocol scheme"),
        Some(c) => {
            let scheme = &before_fragment[..c];
            let valid = scheme.as_bytes()[0].is_ascii_alphabetic()
                && scheme
                    .bytes()
                    .all(|x| x.is_ascii_alphanumeric() || matches!(x, b'+' | b'-' | b'.'));
            if valid {
                return Ok(true);
            }
            if !scheme.contains('/') && !scheme.contains('?') {
                fail!("parse {s:?}: first path segment in URL cannot contain colon");
            }
            Ok(false)
        }
        None => Ok(false),
    }
}

builtin! {
    /// `URL("https://foo.com/bar")` → `true`; `URL("%")` is an error.
    fn url(_, "net.URL", s: &str) {
        parse_url(s)?;
        Ok(Val::Bool(true))
    }
}

builtin! {
    /// `AbsURL("https://foo.com/bar")` → `true`; `AbsURL("/foo/bar")` is an error.
    fn abs_url(_, "net.AbsURL", s: &str) {
        if !parse_url(s)? {
            fail!("URL is not absolute");
        }
        Ok(Val::Bool(true))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        // Most rows follow upstream's pkg/net testdata (conformance cases pkg-net-*).
        check_table(
            "net",
            &[
                (r#"SplitHostPort("[::%lo0]:80")"#, r#"["::%lo0", "80"]"#),
                (r#"SplitHostPort("host:80")"#, r#"["host", "80"]"#),
                (
                    r#"SplitHostPort("host")"#,
                    "!address host: missing port in address",
                ),
                (r#"SplitHostPort("a:b:80")"#, "!too many colons"),
                (r#"JoinHostPort("mod.test", "80")"#, r#""mod.test:80""#),
                (
                    r#"JoinHostPort("2001:db8::1", 80)"#,
                    r#""[2001:db8::1]:80""#,
                ),
                ("JoinHostPort([192, 30, 4, 2], 80)", r#""192.30.4.2:80""#),
                ("JoinHostPort([192, 30, 4], 80)", "!invalid host"),
                (r#"FQDN("foo.bar.")"#, "true"),
                (
                    r#"FQDN("foo.bararararararararararararararararararararararararararararararararara")"#,
                    "false",
                ),
                (r#"FQDN("-a.b")"#, "false"),
                (r#"ParseIP("10.0.0.1")"#, "[10, 0, 0, 1]"),
                (r#"ParseIP("x")"#, r#"!invalid IP address "x""#),
                (r#"IPv4("23.23.23.23")"#, "true"),
                (r#"IPv4("23.23.23.2333")"#, "false"),
                (r#"IPv4("2001:db8::1")"#, "false"),
                (r#"IPv4("010.0.0.1")"#, "false"),
                (r#"IPv6("2001:db8::1")"#, "true"),
                (r#"IPv6("2001:db8::1234567")"#, "false"),
                (r#"IPv6("23.23.23.23")"#, "false"),
                (r#"IP("0:0:0:0:0:0:23.23.23.23")"#, "true"),
                (r#"IP("fe80::1%eth0")"#, "true"),
                ("IP([1, 2, 3])", "false"),
                (r#"IPCIDR("192.168.1.0/24")"#, "true"),
                (r#"IPCIDR("2001:db8:a0b:12f0::1/32")"#, "true"),
                (
                    r#"IPCIDR("172.16.12.3")"#,
                    r#"!netip.ParsePrefix("172.16.12.3"): no '/'"#,
                ),
                ("LoopbackIP([127, 0, 0, 1])", "true"),
                (r#"LoopbackIP("::1")"#, "true"),
                (r#"LoopbackIP("10.0.0.1")"#, "false"),
                (r#"MulticastIP("224.0.0.1")"#, "true"),
                (r#"InterfaceLocalMulticastIP("ff01::1")"#, "true"),
                (r#"LinkLocalMulticastIP("224.0.0.251")"#, "true"),
                (r#"LinkLocalUnicastIP("169.254.1.1")"#, "true"),
                (r#"GlobalUnicastIP("8.8.8.8")"#, "true"),
                (r#"GlobalUnicastIP("255.255.255.255")"#, "false"),
                (r#"UnspecifiedIP("::")"#, "true"),
                (r#"ToIP4("127.0.0.1")"#, "[127, 0, 0, 1]"),
                (r#"ToIP4("::1")"#, "!cannot convert"),
                (
                    r#"ToIP16("127.0.0.1")"#,
                    "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 0, 0, 1]",
                ),
                ("IPString([10, 0, 0, 1])", r#""10.0.0.1""#),
                (
                    r#"IPString("0:0:0:0:0:ffff:1.2.3.4")"#,
                    r#""::ffff:1.2.3.4""#,
                ),
                (r#"AddIP("127.0.0.1", 1)"#, r#""127.0.0.2""#),
                (r#"AddIP("127.0.0.1/8", 2)"#, r#""127.0.0.3/8""#),
                (r#"AddIP("2001:db8::", 1)"#, r#""2001:db8::1""#),
                (r#"AddIP("2001:db8::/64", 2)"#, r#""2001:db8::2/64""#),
                (r#"AddIP("invalid ip", 1)"#, r#"!invalid IP "invalid ip""#),
                (r#"AddIP("0.0.0.0", -1)"#, "!(underflow)"),
                (r#"AddIP("255.255.255.255", 1)"#, "!(overflow)"),
                (r#"AddIP("::ffff:127.0.0.1", 1)"#, r#""::ffff:127.0.0.2""#),
                (r#"AddIPCIDR("192.168.0.0/23", 1)"#, r#""192.168.2.0/23""#),
                (
                    r#"AddIPCIDR("2001:db8:1111:2222::/64", 1)"#,
                    r#""2001:db8:1111:2223::/64""#,
                ),
                (r#"AddIPCIDR("192.168.0.0", 1)"#, "!no '/'"),
                (r#"AddIPCIDR("10.0.0.0/8", -11)"#, "!(underflow)"),
                (r#"AddIPCIDR("255.0.0.0/8", 1)"#, "!(overflow)"),
                (
                    r#"ParseCIDR("10.20.30.40/24")"#,
                    r#"{prefix_mask: "255.255.255.0", prefix_len: 24, prefix_addr: "10.20.30.0", broadcast_addr: "10.20.30.255"}"#,
                ),
                (
                    r#"ParseCIDR("192.168.1.128/25")"#,
                    r#"{prefix_mask: "255.255.255.128", prefix_len: 25, prefix_addr: "192.168.1.128", broadcast_addr: "192.168.1.255"}"#,
                ),
                (
                    r#"ParseCIDR("fe80::/10")"#,
                    r#"{prefix_mask: "ffc0::", prefix_len: 10, prefix_addr: "fe80::"}"#,
                ),
                (
                    r#"ParseCIDR("0.0.0.0/0")"#,
                    r#"{prefix_mask: "0.0.0.0", prefix_len: 0, prefix_addr: "0.0.0.0", broadcast_addr: "255.255.255.255"}"#,
                ),
                (
                    r#"ParseCIDR("invalid")"#,
                    r#"!netip.ParsePrefix("invalid"): no '/'"#,
                ),
                (r#"InCIDR("192.168.1.5", "192.168.1.0/24")"#, "true"),
                (r#"InCIDR("192.168.2.5", "192.168.1.0/24")"#, "false"),
                (r#"InCIDR([192, 168, 1, 100], "192.168.1.0/24")"#, "true"),
                (r#"InCIDR("2001:db8::1", "2001:db8::/32")"#, "true"),
                (
                    r#"InCIDR([32, 1, 13, 185, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], "2001:db8::/32")"#,
                    "false",
                ),
                (r#"InCIDR("255.255.255.255", "0.0.0.0/0")"#, "true"),
                (
                    r#"InCIDR("invalid", "0.0.0.0/0")"#,
                    r#"!invalid IP "invalid""#,
                ),
                (r#"CompareIP("10.0.0.1", "10.0.0.2")"#, "-1"),
                (r#"CompareIP("::1", "10.0.0.2")"#, "1"),
                (r#"PathEscape("foo/bar")"#, r#""foo%2Fbar""#),
                (r#"PathUnescape("foo%2Fbar")"#, r#""foo/bar""#),
                (r#"PathUnescape("a%zz")"#, r#"!invalid URL escape "%zz""#),
                (r#"PathUnescape("a%é")"#, r#"!invalid URL escape "%é""#),
                (r#"QueryEscape("f%o b")"#, r#""f%25o+b""#),
                (r#"QueryUnescape("f%25o+b")"#, r#""f%o b""#),
                (r#"URL("/foo/bar")"#, "true"),
                (r#"URL("https://foo.com/bar")"#, "true"),
                (r#"URL("%")"#, "!invalid URL escape"),
                (r#"AbsURL("https://foo.com/bar")"#, "true"),
                (r#"AbsURL("/foo/bar")"#, "!URL is not absolute"),
                (r#"AbsURL("%")"#, "!invalid URL escape"),
            ],
        );
    }
}
