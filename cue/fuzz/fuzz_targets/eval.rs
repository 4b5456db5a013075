//! Fuzz target `eval`: parse, evaluate, export and print (as `cue eval` does) any input (lossily
//! decoded as UTF-8). Nothing may panic, hang or overflow the stack; errors are fine. Limits are
//! lowered so that every input finishes quickly, and evaluation runs on a 64 MiB thread as the
//! CLI does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data).into_owned();
    let worker = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let config = cue::Config {
                max_steps: 200_000,
                max_wall_time: Duration::from_secs(2),
                max_output_bytes: 1 << 20,
                ..cue::Config::default()
            };
            let rt = cue::Runtime::new(config);
            if let Ok(v) = rt.build_files(&[("fuzz.cue".to_string(), src)]) {
                let _ = v.to_json();
                // What `cue eval` prints, for any value, concrete or not.
                let _ = v.to_cue();
            }
        });
    if let Ok(handle) = worker {
        // A panic in the worker must fail the run as well.
        if handle.join().is_err() {
            panic!("evaluation panicked");
        }
    }
});
