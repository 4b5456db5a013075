//! The one helper for the child processes the tests run (`opm-operator dev|serve`, `kube-emu`):
//! stdout and stderr collected line by line into one log (read by assertion messages and by
//! tests that wait for a line), and the process killed and reaped on drop, so a failing test
//! leaves nothing running.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// A running child process with its combined output.
pub struct LoggedChild {
    /// The process.
    pub child: Child,
    log: Arc<Mutex<String>>,
}

impl LoggedChild {
    /// Spawns `cmd` with stdout and stderr piped into the log.
    pub fn spawn(cmd: &mut Command) -> std::io::Result<LoggedChild> {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let log = Arc::new(Mutex::new(String::new()));
        let streams: [Option<Box<dyn std::io::Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ];
        for stream in streams.into_iter().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                    l.push_str(&line);
                    l.push('\n');
                }
            });
        }
        Ok(LoggedChild { child, log })
    }

    /// The output so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The last `n` lines of the output.
    pub fn tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// SIGKILL and reap: the process dies holding whatever it holds.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for LoggedChild {
    fn drop(&mut self) {
        self.kill();
    }
}
