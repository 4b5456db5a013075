//! The example catalog and module `opm-operator dev` publishes (docs/design/architecture.md §4): the fixture set's
//! `core`, `kube`, `mini`, `gateway` and `demo` modules (fixtures/opm/README.md), embedded in the
//! binary so `dev` runs from any directory.
//!
//! Rule: this table lists every file of those module directories; the unit test
//! `the_bundle_lists_every_fixture_file` fails when a file is added or removed on disk without
//! updating it (regenerate the `include_bytes!` lines in the same order: module, then path).

/// One embedded module: its directory under `fixtures/opm/` and its files (path, contents).
pub struct BundledModule {
    /// Directory name under `fixtures/opm/`.
    pub dir: &'static str,
    /// Files relative to the module root, sorted.
    pub files: &'static [(&'static str, &'static [u8])],
}

/// The modules in publish order (dependencies first).
pub const MODULES: &[BundledModule] = &[
    BundledModule {
        dir: "core",
        files: &[
            (
                "catalog.cue",
                include_bytes!("../../../fixtures/opm/core/catalog.cue"),
            ),
            (
                "component.cue",
                include_bytes!("../../../fixtures/opm/core/component.cue"),
            ),
            (
                "cue.mod/module.cue",
                include_bytes!("../../../fixtures/opm/core/cue.mod/module.cue"),
            ),
            (
                "instance.cue",
                include_bytes!("../../../fixtures/opm/core/instance.cue"),
            ),
            (
                "module.cue",
                include_bytes!("../../../fixtures/opm/core/module.cue"),
            ),
            (
                "platform.cue",
                include_bytes!("../../../fixtures/opm/core/platform.cue"),
            ),
            (
                "primitives.cue",
                include_bytes!("../../../fixtures/opm/core/primitives.cue"),
            ),
            (
                "transformer.cue",
                include_bytes!("../../../fixtures/opm/core/transformer.cue"),
            ),
            (
                "types.cue",
                include_bytes!("../../../fixtures/opm/core/types.cue"),
            ),
        ],
    },
    BundledModule {
        dir: "kube",
        files: &[
            (
                "apps/v1/types.cue",
                include_bytes!("../../../fixtures/opm/kube/apps/v1/types.cue"),
            ),
            (
                "core/v1/types.cue",
                include_bytes!("../../../fixtures/opm/kube/core/v1/types.cue"),
            ),
            (
                "cue.mod/module.cue",
                include_bytes!("../../../fixtures/opm/kube/cue.mod/module.cue"),
            ),
            (
                "meta/v1/types.cue",
                include_bytes!("../../../fixtures/opm/kube/meta/v1/types.cue"),
            ),
        ],
    },
    BundledModule {
        dir: "mini",
        files: &[
            (
                "blueprints/stateless.cue",
                include_bytes!("../../../fixtures/opm/mini/blueprints/stateless.cue"),
            ),
            (
                "catalog.cue",
                include_bytes!("../../../fixtures/opm/mini/catalog.cue"),
            ),
            (
                "cue.mod/module.cue",
                include_bytes!("../../../fixtures/opm/mini/cue.mod/module.cue"),
            ),
            (
                "identity/identity.cue",
                include_bytes!("../../../fixtures/opm/mini/identity/identity.cue"),
            ),
            (
                "resources/configs.cue",
                include_bytes!("../../../fixtures/opm/mini/resources/configs.cue"),
            ),
            (
                "resources/container.cue",
                include_bytes!("../../../fixtures/opm/mini/resources/container.cue"),
            ),
            (
                "traits/expose.cue",
                include_bytes!("../../../fixtures/opm/mini/traits/expose.cue"),
            ),
            (
                "traits/scaling.cue",
                include_bytes!("../../../fixtures/opm/mini/traits/scaling.cue"),
            ),
            (
                "transformers/configmap.cue",
                include_bytes!("../../../fixtures/opm/mini/transformers/configmap.cue"),
            ),
            (
                "transformers/deployment.cue",
                include_bytes!("../../../fixtures/opm/mini/transformers/deployment.cue"),
            ),
            (
                "transformers/helpers.cue",
                include_bytes!("../../../fixtures/opm/mini/transformers/helpers.cue"),
            ),
            (
                "transformers/tests.cue",
                include_bytes!("../../../fixtures/opm/mini/transformers/tests.cue"),
            ),
        ],
    },
    BundledModule {
        dir: "gateway",
        files: &[
            (
                "catalog.cue",
                include_bytes!("../../../fixtures/opm/gateway/catalog.cue"),
            ),
            (
                "cue.mod/module.cue",
                include_bytes!("../../../fixtures/opm/gateway/cue.mod/module.cue"),
            ),
            (
                "transformers/route.cue",
                include_bytes!("../../../fixtures/opm/gateway/transformers/route.cue"),
            ),
        ],
    },
    BundledModule {
        dir: "demo",
        files: &[
            (
                "cue.mod/module.cue",
                include_bytes!("../../../fixtures/opm/demo/cue.mod/module.cue"),
            ),
            (
                "module.cue",
                include_bytes!("../../../fixtures/opm/demo/module.cue"),
            ),
        ],
    },
];

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_str().unwrap().to_owned());
            }
        }
    }

    #[test]
    fn the_bundle_lists_every_fixture_file() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm");
        for m in MODULES {
            let root = base.join(m.dir);
            let mut on_disk = Vec::new();
            walk(&root, &root, &mut on_disk);
            on_disk.sort();
            let listed: Vec<String> = m.files.iter().map(|(p, _)| (*p).to_owned()).collect();
            assert_eq!(listed, on_disk, "fixtures/opm/{}", m.dir);
            for (p, bytes) in m.files {
                assert_eq!(
                    *bytes,
                    std::fs::read(root.join(p)).unwrap().as_slice(),
                    "{p}"
                );
            }
        }
    }
}
