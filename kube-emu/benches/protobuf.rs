//! Decoding of protobuf request bodies (`kube_emu::protobuf::decode`): a Deployment of the
//! shape `kubectl create deployment` sends, grown to two containers with env, ports,
//! resources and probes, decoded `KUBE_EMU_BENCH_N` times (20,000 by default); the best of
//! five rounds is reported. Run: `cargo bench -p kube-emu --bench protobuf`.

// A benchmark binary reports failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::{Duration, Instant};

/// A protobuf message under construction.
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut n: u64) -> &mut Self {
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
    fn int(&mut self, f: u64, n: u64) -> &mut Self {
        self.varint(f << 3).varint(n)
    }
    fn bytes(&mut self, f: u64, b: &[u8]) -> &mut Self {
        self.varint(f << 3 | 2).varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, f: u64, s: &str) -> &mut Self {
        self.bytes(f, s.as_bytes())
    }
    fn msg(&mut self, f: u64, m: &Pb) -> &mut Self {
        self.bytes(f, &m.0)
    }
}

fn map_entry(k: &str, v: &str) -> Pb {
    let mut e = Pb::default();
    e.str(1, k).str(2, v);
    e
}

fn container(name: &str) -> Pb {
    let mut c = Pb::default();
    c.str(1, name).str(2, "nginx:1.27");
    for (k, v) in [("MODE", "prod"), ("LOG_LEVEL", "info"), ("PORT", "8080")] {
        let mut env = Pb::default();
        env.str(1, k).str(2, v);
        c.msg(7, &env);
    }
    let mut port = Pb::default();
    port.str(1, "http").int(3, 8080).str(4, "TCP");
    c.msg(6, &port);
    let mut res = Pb::default();
    for (field, cpu, mem) in [(1, "500m", "256Mi"), (2, "100m", "64Mi")] {
        for (k, q) in [("cpu", cpu), ("memory", mem)] {
            let mut qty = Pb::default();
            qty.str(1, q);
            let mut e = Pb::default();
            e.str(1, k).msg(2, &qty);
            res.msg(field, &e);
        }
    }
    c.msg(8, &res);
    let mut port_ref = Pb::default();
    port_ref.int(1, 0).int(2, 8080);
    let mut get = Pb::default();
    get.str(1, "/healthz").msg(2, &port_ref).str(4, "HTTP");
    let mut handler = Pb::default();
    handler.msg(2, &get);
    let mut probe = Pb::default();
    probe.msg(1, &handler).int(2, 5).int(3, 1).int(4, 10);
    c.msg(10, &probe).msg(11, &probe);
    c.str(13, "/dev/termination-log").str(14, "IfNotPresent");
    c
}

fn deployment() -> Vec<u8> {
    let mut meta = Pb::default();
    meta.str(1, "web")
        .str(3, "default")
        .msg(11, &map_entry("app", "web"))
        .msg(12, &map_entry("team", "platform"));
    let mut pod = Pb::default();
    pod.msg(2, &container("web")).msg(2, &container("sidecar"));
    pod.str(3, "Always").str(6, "ClusterFirst");
    let mut tmeta = Pb::default();
    tmeta.msg(11, &map_entry("app", "web"));
    let mut tmpl = Pb::default();
    tmpl.msg(1, &tmeta).msg(2, &pod);
    let mut sel = Pb::default();
    sel.msg(1, &map_entry("app", "web"));
    let mut spec = Pb::default();
    spec.int(1, 3).msg(2, &sel).msg(3, &tmpl);
    let mut d = Pb::default();
    d.msg(1, &meta).msg(2, &spec).msg(3, &Pb::default());
    let mut tm = Pb::default();
    tm.str(1, "apps/v1").str(2, "Deployment");
    let mut u = Pb::default();
    u.msg(1, &tm).msg(2, &d);
    let mut out = b"k8s\0".to_vec();
    out.extend_from_slice(&u.0);
    out
}

fn main() {
    let n: usize = std::env::var("KUBE_EMU_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let body = deployment();
    let v = kube_emu::protobuf::decode(&body).unwrap();
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][1]["name"],
        "sidecar"
    );
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            black_box(kube_emu::protobuf::decode(black_box(&body)).unwrap());
        }
        best = best.min(t.elapsed());
    }
    println!(
        "protobuf decode Deployment ({} bytes): {n} in {:.3} s = {:.2} µs/op",
        body.len(),
        best.as_secs_f64(),
        best.as_secs_f64() * 1e6 / n as f64
    );
}
