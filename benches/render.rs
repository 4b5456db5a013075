//! Render benchmark (issue 13 "Done when"): the platform build time, the per-render fixed cost
//! of the demo module, a generated 129-component module, and peak RSS. Run by hand, not in CI:
//!
//!     cargo bench -p opm-operator --bench render
//!
//! The fixture modules (fixtures/opm) and the generated module are published into an OCI layout
//! in a temp dir and read through the on-disk module cache, as the operator does; every render
//! is a full render (own runtime, pull from the cache, build, match, execute). Goal (issue 13):
//! the 129-component render under 180 ms and under 100 MB.
//!
//! Profiling: run the binary itself under valgrind with the variables in its environment
//! (`BENCH_ONLY=big BENCH_RUNS=3 valgrind --tool=callgrind target/release/deps/render-<hash>`);
//! `valgrind … env BENCH_ONLY=big …` profiles `env` only, not the bench it starts.
//!
//! Eleventh session (2026-12-07): one jemalloc arena (`narenas:1`, `.cargo/config.toml`) and
//! the machine probe. Medians of 21 renders, a thread per render (the default), alternated in
//! eight rounds with the session's starting binary on an idle machine (probe 0.86 ms in every
//! round): 84.9/82.9/83.7/87.0/85.4/90.9/88.9/90.4 ms against 86.5/87.8/86.6/88.1/88.5/91.2/
//! 96.9/94.7; renders on a reused thread (`ulimit -s 2000000`) 87.0/88.4 against 90.6/90.3.
//! Minor faults 24-27 k per run against 35-58 k. Peak RSS over the session's 32 runs with one
//! arena 46-51 MiB, over 25 with the default 47-53 MiB. The render thread's instructions are
//! unchanged (callgrind `--separate-threads=yes`: 715.4 M against 716.1 M): the gain is pages
//! reused instead of faulted in again. `opm-operator render` (one render per process) is
//! unchanged: gen_components20 0.12-0.15 s, 68 MB either way.
//!
//! Tenth session (2026-12-07): whole-program optimisation. Release builds are one fat-LTO unit
//! (root `Cargo.toml`): callgrind `--separate-threads=yes`, `BENCH_ONLY=big BENCH_RUNS=1`, the
//! render thread 744.9 M -> 720.5 M, then 716.2 M with the compiler's scopes and the regex
//! cache on foldhash instead of SipHash (-3.8 % in all). Whole-run counts now vary by +-10 M
//! between identical runs (the freeing thread's timing moves work between threads), so the
//! render thread's own count is the figure to compare. Wall medians of 21 renders, alternated
//! with the session's starting binary in five rounds, renders on a reused thread (`ulimit -s
//! 2000000`, as the operator's blocking pool): 100/91/92/91/120 ms against 95/96/103/95/102,
//! peak RSS 47-48 MiB for both. With the bench's fresh thread per render (the default, the
//! CLI's way) both binaries peak at 47-53 MiB from run to run: jemalloc binds each new thread
//! to the least-loaded arena, and whether a render's pages come from the previous render's
//! arena depends on the freeing thread's timing. Tried and dropped: larger jemalloc thread
//! caches and rarer cache GC (`tcache_*` options: the render thread's count unchanged), freeing
//! each pair's rolled-back vertices on a long-lived freeing thread (render thread -10 M, but a
//! wake-up per pair, 1.7 k context switches per run, and no wall time gained), and running the
//! bench's renders on one spawned big-stack thread (setup and renders then hold two arenas:
//! 49-54 MiB).
//!
//! Ninth session (2026-12-07): the allocator. The process allocator is jemalloc (`src/lib.rs`,
//! options in `.cargo/config.toml`) and a render's evaluator is freed on a thread of its own
//! (`Staged::retire`). Callgrind `BENCH_ONLY=big BENCH_RUNS=1`, whole run: 959.4 M -> 817.1 M
//! (jemalloc alone 822.2 M); with `--separate-threads=yes` the render thread is 744.9 M and the
//! freeing thread 27.7 M. Wall medians of 11 renders, alternated with the session's starting
//! binary in five rounds: 132/132/156/156/132 ms against 160/179/173/156/175 ms (a slow phase of
//! this machine; in a faster one, 88-105 ms against 116-187 ms); peak RSS 48-51 MiB against 47.
//! Tried and dropped: mimalloc (as fast, peak 103 MiB; 46 MiB only when it purges at once, then
//! slower than glibc), jemalloc with its default 10 s decay (the operator's reused render
//! threads peak at 71-79 MiB), and freeing on a thread with glibc (its arena lock: 24 k context
//! switches, slower than freeing inline). jemalloc without the freeing thread faults in every
//! render's pages again on the bench's fresh thread per render (103 k minor faults against
//! 19 k) and gained little wall time.
//!
//! Eighth session (2026-12-06; callgrind `BENCH_ONLY=big BENCH_RUNS=1`, whole run): 995.2 M
//! -> 957.6 M (-3.8 %), dhat 1.070 M -> 0.995 M blocks, peak RSS 47-48 MiB either way. A
//! vertex's first six arcs in a boxed array instead of an index map (three allocations for
//! the first arc; 995.2 -> 972.1 M), one buffer for the fingerprints of merged disjuncts
//! (-> 965.6 M), and a concrete scalar at its last disjunction no longer cloned for the
//! alternatives of a disjoint kind (`#LabelsType`; -> 957.6 M). Measured and dropped: a
//! shared stack for the arcs of the walk for errors in each disjunct (972.13 -> 971.99 M: its
//! own allocations are 2 k; the 58 k under it are the evaluation it triggers), and allocating
//! a literal's outer groups on first use (more allocations: most have several).
//!
//! Where one 129-component render goes (phase 4, seventh session, 2026-12-06; callgrind,
//! inclusive, `BENCH_RUNS=2` minus `BENCH_RUNS=1`: 871.5 M for the render, 995.1 M for the
//! whole `BENCH_RUNS=1` run): module load and parse 24 M, compile 9 M (staging 33.5 M in all);
//! instance evaluation and validation 340 M (`fields_where` 100 M evaluating the instance's
//! fields, `validate` 240 M); the 129 pair outputs 405 M (evaluation and readout 339 M, the
//! rollback freeing each pair's vertices 38 M, parsing and compiling each pair's expression
//! 22 M, writing it 15 M, JSON 5 M); the matcher 11.5 M; the render digest 14 M (sha256 7 M);
//! freeing the evaluator 45 M. By source line (processed conjuncts), about a third of a pair
//! is its transformer context (`#TransformerContext`'s label folds and metadata checks: at
//! least 13.6 k of the 53.6 k conjuncts the 129 pairs process), and the `#LabelsType` pattern
//! (`[string]: string | int | bool`, one disjunction per label) is the largest single site in
//! both the instance and the outputs (7.9 k of the render's 101 k conjuncts).
//! malloc and free are 27 % of all instructions; glibc's tcache holding 300 blocks per size
//! instead of 7 (`GLIBC_TUNABLES=glibc.malloc.tcache_count=300`, not settable from code) cuts
//! the whole run 995 -> 941 M but takes peak RSS to 52 MiB (100: 961 M, 50 MiB).
//!
//! Latest figures (phase 4, fifth session, 2026-12-06): callgrind `BENCH_ONLY=big BENCH_RUNS=1`
//! 1.130 G -> 1.031 G for the whole bench (the two renders 969 M -> 941 M: the walk for errors
//! in hidden fields no longer walks each component's copies of the same blueprint and trait
//! definitions; the registry's OCI client, 76 M of setup, is no longer built for layouts), peak
//! RSS 51 -> 47 MiB; wall medians of 11 renders alternated with the session's starting binary:
//! 274/288/330/189 ms -> 197/173/262/263 ms (the machine's speed swings as below).
//!
//! Figures of the fourth session (2026-12-06): wall times on this machine now swing by half from
//! run to run with nothing else running (one binary: 198-333 ms medians of 11 renders), so
//! instruction counts decide: callgrind `BENCH_ONLY=big BENCH_RUNS=1` 1.271 G -> 1.130 G for
//! the whole bench (the two renders in it 1.109 G -> 0.968 G, -12.7 %), peak RSS 52 MiB
//! either way; wall medians alternated with the session's starting binary 243 -> 222 ms. The
//! saving is the matcher's unify rung, now one check per pair of contract values built from
//! the same definitions instead of one per component (116 M -> under 1 M). Where the
//! 129-component render goes now (inclusive, one render): pair outputs 430 M (2.2 M per
//! pair), instance validation 311 M, freeing the evaluator 51 M, staging 43 M; malloc/free
//! are 28 % of all instructions. A faster allocator is still no answer here: mimalloc took
//! the render to 133-163 ms (-25 %) but peak RSS to 96 MiB (74 MiB for a single render), fat
//! LTO with one codegen unit -3 to -5 %.
//!
//! Figures of session 12 (idle machine, `BENCH_RUNS=5`): the 129-component render in
//! 151-154 ms wall (150 ms CPU), peak RSS 50 MiB; demo render 5.5-7.0 ms; platform build
//! 2.5 ms. Callgrind (`BENCH_ONLY=big BENCH_RUNS=1`: bench setup plus one render) 1.783 G ->
//! 1.075 G instructions, massif peak heap 97.9 -> 39.3 MB, processed conjuncts 326 k -> 103 k,
//! environments 118 k -> 38 k. What changed: pair outputs and the matcher's unify checks are
//! throw-away evaluations rolled back afterwards (`Runtime::export_expr`, `Value::check_unify`:
//! the peak is the instance's, not the instance's plus every output's), a `close()` call keeps
//! one closedness id per vertex, and repeated literals reaching a vertex before it expands are
//! taken once with their outer ids merged (the evaluator's module docs, design items 6-8). Session 11: 2.270 G -> 1.782 G, 153 -> 108
//! MiB, 426-441 -> 309-316 ms. Session 10: 2.568 G -> 2.270 G, 196 -> 153 MiB, 480-499 ->
//! 426-441 ms. The breakdown below was measured before all three; its shape is older still.
//!
//! Where a 129-component render goes (callgrind, 3 renders = 9.44 G instructions, system
//! allocator): instance validation 4.2 G and the instance field walk 1.8 G (both are the
//! evaluation of the components themselves; 1.1 G of all evaluation is reached only through
//! definitions and hidden fields, which validation walks as Go's does), pair outputs 1.8 G (a
//! pair shares its component through `#component` instead of evaluating it again), the
//! matcher's unify rung 0.57 G (one unify + validate per pair: the catalogs have one
//! transformer per contract), freeing the runtime 0.65 G, staging 0.1 G; malloc/free are about
//! a quarter of all of it. Peak memory (massif, one render: 216 MB of heap)
//! is that render's evaluator and nothing else: the vertex arena (83.5 k vertices of 656 bytes,
//! 55 MB), conjunct and arc vectors (about 70 MB), arc maps (20 MB), copied expressions
//! (19 MB), disjunct clones' conjunct lists (10 MB) and environments (8 MB); parsed files,
//! the registry and the results are under 2 MB. A faster allocator (measured on the binary and
//! this bench) cuts instructions but not the peak: mimalloc -17 % instructions, +37 % peak RSS;
//! jemalloc -10 % instructions, same peak, no CPU-time gain measurable here; neither is used.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark binary fails loudly"
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cue::module::{DirFs, Registry, Target};
use cue::path::{Path as CuePath, Selector};
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{BuiltPlatform, ModuleRequest};
use opm_operator::platform::build::build_dir;
use opm_operator::platform::RegistryShape;
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};
use opm_operator::render::Renderer;

const MODULES: &[&str] = &["core", "kube", "mini", "gateway", "demo"];

fn opm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm")
}

/// A module with `n` components: odd ones stateless workloads, even ones configs.
fn write_big_module(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir.join("cue.mod")).unwrap();
    std::fs::write(
        dir.join("cue.mod/module.cue"),
        "module: \"fixtures.test/modules/big@v0\"\nlanguage: version: \"v0.17.0\"\nsource: kind: \"self\"\n\
         deps: {\n\t\"fixtures.test/catalogs/mini@v0\": v: \"v0.1.0\"\n\t\"fixtures.test/core@v0\": v: \"v0.1.0\"\n\
         \t\"fixtures.test/x/kube@v0\": {v: \"v0.1.0\", default: true}\n}\n",
    )
    .unwrap();
    let mut s = String::from(
        "package big\n\nimport (\n\tc \"fixtures.test/core@v0\"\n\tbp \"fixtures.test/catalogs/mini/blueprints\"\n\
         \tres \"fixtures.test/catalogs/mini/resources\"\n)\n\nc.#Module\n\n\
         metadata: {\n\tmodulePath: \"fixtures.test/modules/big@v0\"\n\tname: \"big\"\n\tversion: \"0.1.0\"\n}\n\n\
         #config: {\n\ttag: string | *\"1.0.0\"\n\treplicas: int & >=1 & <=10 | *2\n}\n\n#components: {\n",
    );
    for i in 0..n {
        if i % 2 == 0 {
            writeln!(
                s,
                "\t\"web-{i}\": bp.#Stateless & {{spec: stateless: {{container: {{image: {{repository: \"registry.fixtures.test/web-{i}\", tag: #config.tag}}, ports: http: port: 8080, env: N: value: \"{i}\"}}, scaling: count: #config.replicas}}}}"
            )
            .unwrap();
        } else {
            writeln!(
                s,
                "\t\"conf-{i}\": res.#Configs & {{spec: configs: {{main: data: {{key: \"v{i}\"}}, frozen: {{immutable: true, data: {{a: \"{i}\"}}}}}}}}"
            )
            .unwrap();
        }
    }
    s.push_str("}\n");
    std::fs::write(dir.join("module.cue"), s).unwrap();
}

fn platform(registry: Arc<ModuleRegistry>) -> BuiltPlatform {
    let dir = opm().join("platform/generated");
    build_dir(
        registry,
        RegistryShape::CatalogEntry,
        cue::Config::default(),
        &dir,
    )
    .unwrap_or_else(|e| panic!("building {}: {e}", dir.display()))
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) of this process so far, from /proc/self/stat (clock ticks of
/// 10 ms): on a loaded machine the wall time of a render says little, its CPU time more.
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name (which is in parentheses and may hold spaces).
            let rest = s.rsplit_once(')')?.1.to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// A fixed workload that is none of our code: this machine's speed swings by half within seconds
/// (no steal time shows in /proc/stat and no PMU is visible here), so each render is timed next
/// to this probe (fill 64 k words pseudo-randomly and sort them, in `buf`) and a run in a slow
/// phase of the machine can be told apart from a slow render. The probe allocates nothing: a
/// first version that allocated and freed 4 MiB before each render moved the renders' peak RSS
/// from 47-48 to 52-60 MiB (84 with eight arenas).
fn probe(buf: &mut [u64]) -> Duration {
    let t = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for w in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *w = x;
    }
    buf.sort_unstable();
    std::hint::black_box(&buf);
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // RENDER_TRACE=1 prints the render kernel's phase marks (instance validated, matched, each
    // pair) with their elapsed time; BENCH_ONLY=big runs only the 129-component render (after
    // one platform build and one demo render); BENCH_RUNS=n sets how often it runs.
    if std::env::var_os("RENDER_TRACE").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter("opm_operator::render=debug")
            .with_writer(std::io::stderr)
            .init();
    }
    let only_big = std::env::var("BENCH_ONLY").is_ok_and(|x| x == "big");
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let publisher = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout.clone(),
    })))
    .unwrap();
    for m in MODULES {
        publisher.publish(&opm().join(m), "v0.1.0").unwrap();
    }
    let big = tmp.path().join("big");
    write_big_module(&big, 129);
    publisher.publish(&big, "v0.1.0").unwrap();

    let mut cfg = RegistryConfig::new(Mapping::single(Location::Layout { dir: layout }));
    cfg.cache_dir = Some(tmp.path().join("cache"));
    let modules = Arc::new(ModuleRegistry::new(cfg).unwrap());
    let registry: Arc<dyn Registry> = modules.clone();
    let config = cue::Config {
        max_wall_time: Duration::from_secs(600),
        ..cue::Config::default()
    };
    let renderer = Renderer::new(registry.clone()).with_config(config.clone());
    let p = platform(modules);

    // Platform build: load and evaluate the generated platform module and its composed
    // transformers (what the platform builder does before reading the inventory).
    let mut builds = Vec::new();
    for _ in 0..(if only_big { 1 } else { 5 }) {
        let t = Instant::now();
        let rt = cue::Runtime::new(config.clone());
        let fs = DirFs::new(&p.dir);
        let v = rt
            .build_module(&fs, &Target::Dir(String::new()), Some(registry.as_ref()))
            .unwrap_or_else(|d| panic!("platform build: {}", rt.render(&d)));
        let composed = v
            .lookup_path(&CuePath::new(vec![Selector::Definition(
                "#composedTransformers".into(),
            )]))
            .unwrap();
        for f in composed.fields_where(cue::FieldFilter::data()) {
            f.value.validate(false).unwrap();
        }
        builds.push(t.elapsed());
    }
    println!(
        "platform build (generated, mini): median {:?}",
        median(builds)
    );

    let values: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(opm().join("values/valid.json")).unwrap())
            .unwrap();
    let demo = ModuleRequest {
        name: "shop".into(),
        namespace: "prod".into(),
        path: "fixtures.test/modules/demo@v0".into(),
        version: "v0.1.0".into(),
        values: Some(values),
    };
    let mut times = Vec::new();
    for _ in 0..(if only_big { 1 } else { 10 }) {
        let t = Instant::now();
        let r = renderer
            .render(&demo, &p, SkewPolicy::Warn)
            .unwrap_or_else(|e| panic!("demo: {}", opm_operator::kernel::KernelError::from(e)));
        times.push(t.elapsed());
        assert_eq!(r.objects.len(), 3);
    }
    println!(
        "demo render (2 components, 3 objects): median {:?}",
        median(times)
    );

    let bigreq = ModuleRequest {
        name: "big".into(),
        namespace: "prod".into(),
        path: "fixtures.test/modules/big@v0".into(),
        version: "v0.1.0".into(),
        // Concrete values: the module's defaults collide with the catalog's (`*"1.0.0"` vs
        // `*"latest"`, `*2` vs `*1`), which CUE resolves to no default at all.
        values: Some(serde_json::json!({"tag": "1.0.0", "replicas": 2})),
    };
    let mut times = Vec::new();
    let mut cpu = Vec::new();
    let mut objects = 0;
    // BENCH_RUNS=n renders the big module n times (default 3; 1 under a profiler).
    let runs = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(3);
    let mut probes = Vec::with_capacity(runs);
    let mut buf = vec![0u64; 64 << 10];
    for _ in 0..runs {
        probes.push(probe(&mut buf));
        let t = Instant::now();
        let c = cpu_time();
        let r = renderer
            .render(&bigreq, &p, SkewPolicy::Warn)
            .unwrap_or_else(|e| panic!("big: {}", opm_operator::kernel::KernelError::from(e)));
        cpu.push(cpu_time().saturating_sub(c));
        times.push(t.elapsed());
        objects = r.objects.len();
    }
    println!(
        "129-component render ({objects} objects): median {:?} wall, {:?} CPU",
        median(times),
        median(cpu)
    );
    let best = probes.iter().min().copied().unwrap_or_default();
    println!(
        "machine probe (fixed workload before each render): median {:?}, best {best:?}",
        median(probes)
    );
    println!("peak RSS: {} MiB", peak_rss_kib() / 1024);
}
