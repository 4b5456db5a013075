//! The evaluation limits of every render path: the reconcilers, the REST render API, the render
//! CLI and the platform build all evaluate under [`render_config`].
//!
//! Rules:
//! - One render (one `cue::Runtime`) has one memory budget, `--render-memory-limit`
//!   (`cue::Config::max_memory_bytes`), accounted by the evaluator at its allocation sites;
//!   past it the render stops with `Error::Memory` (class `ResourceExhausted`) naming the budget,
//!   the figure reached and the value being evaluated. The time limit stays as it was.
//! - The default, [`DEFAULT_RENDER_MEMORY_LIMIT`] (512 MiB), is measured (release,
//!   `opm-operator render`, docs/install.md "Memory sizing"): the real OPM modules charge at
//!   most 106 MiB of it (the 20-component module; web_app, podinfo and harness_mini 33–36), so
//!   they keep more than four times their figure, while a module that multiplies lists is refused
//!   in seconds and well under 600 MB of resident memory.
//! - Memory sizing of a process that renders: its floor plus `--max-concurrent-renders` (one set
//!   of render slots for the whole process) × the budget (docs/install.md, memory sizing).
//! - The flag takes a byte quantity as Kubernetes writes one: a plain number of bytes, or with a
//!   binary (`Ki`, `Mi`, `Gi`) or decimal (`k`, `M`, `G`) suffix; at least [`MIN_RENDER_MEMORY_LIMIT`].

/// The default `--render-memory-limit` (module docs).
pub const DEFAULT_RENDER_MEMORY_LIMIT: &str = "512Mi";

/// The smallest `--render-memory-limit` accepted: below it not even the fixtures render.
pub const MIN_RENDER_MEMORY_LIMIT: u64 = 16 << 20;

/// `base` with the memory budget `memory_bytes`.
pub fn render_config(base: cue::Config, memory_bytes: u64) -> cue::Config {
    cue::Config {
        max_memory_bytes: memory_bytes,
        ..base
    }
}

/// Parses a byte quantity (module docs): `512Mi`, `1Gi`, `300M`, `268435456`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: not a byte quantity (e.g. 512Mi, 1Gi, 300M)"))?;
    let unit: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => {
            return Err(format!(
                "{text:?}: unknown suffix {suffix:?} (use Ki, Mi, Gi, k, M or G)"
            ))
        }
    };
    let bytes = n
        .checked_mul(unit)
        .ok_or_else(|| format!("{text:?}: too large"))?;
    if bytes < MIN_RENDER_MEMORY_LIMIT {
        return Err(format!(
            "{text:?}: below the minimum of {} MiB",
            MIN_RENDER_MEMORY_LIMIT >> 20
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_as_kubernetes_writes_them() {
        assert_eq!(parse_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(parse_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_bytes("300M"), Ok(300_000_000));
        assert_eq!(parse_bytes("268435456"), Ok(256 << 20));
        assert_eq!(parse_bytes(DEFAULT_RENDER_MEMORY_LIMIT), Ok(512 << 20));
        for bad in [
            "",
            "Mi",
            "12 Mi",
            "1.5Gi",
            "5Ti",
            "-1Gi",
            "1Mi",
            "99999999999999999999Gi",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_config_carries_the_budget_and_keeps_the_rest() {
        let base = cue::Config::default();
        let c = render_config(base.clone(), 64 << 20);
        assert_eq!(c.max_memory_bytes, 64 << 20);
        assert_eq!(c.max_wall_time, base.max_wall_time);
        assert_eq!(c.max_steps, base.max_steps);
    }
}
