//! The operator's allocator (`src/lib.rs` `ALLOCATOR`, feature `jemalloc`): the binary runs on
//! jemalloc, with the options of `.cargo/config.toml` built in. A build that missed them would
//! keep jemalloc's 10 s decay, and back-to-back renders on the operator's reused threads would
//! peak at 71-79 MiB instead of 48-51 (`benches/render.rs`), and four arenas per CPU of the node,
//! whose peak depends on which arenas the render threads draw.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

#[cfg(feature = "jemalloc")]
#[test]
fn the_binary_runs_on_jemalloc_with_the_workspace_options() {
    // jemalloc prints its statistics on stderr at exit when asked to through its environment.
    let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Begin jemalloc statistics"),
        "no jemalloc statistics: the binary does not run on jemalloc\n{err}"
    );
    assert!(
        err.contains("config.malloc_conf: \"dirty_decay_ms:300,narenas:1\""),
        "jemalloc was built without .cargo/config.toml's options\n{err}"
    );
    assert!(err.contains("opt.dirty_decay_ms: 300 "), "{err}");
    // One arena for every thread (.cargo/config.toml says why).
    assert!(err.contains("opt.narenas: 1\n"), "{err}");
}
