//! `KillOnDrop`: a child process a test started (a consumer to kill, a
//! private broker), killed and reaped however the test ends.

use std::process::Child;

/// Kills (SIGKILL) and reaps the child when dropped.
#[derive(Debug)]
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
