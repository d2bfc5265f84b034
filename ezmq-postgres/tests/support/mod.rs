//! A private PostgreSQL server for the tests that restart it: `initdb`
//! into a fresh directory, `pg_ctl` on a free loopback port, run as the
//! `postgres` user when the tests run as root (PostgreSQL refuses root).

use std::path::PathBuf;
use std::process::{Command, Output};

/// A private server, stopped and deleted on drop.
#[derive(Debug)]
pub(crate) struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PrivatePostgres {
    /// Starts one; `None` (after a skip line) when PostgreSQL's server
    /// binaries are not installed.
    pub(crate) fn start() -> Option<Self> {
        let Some(bin) = server_bin() else {
            println!("skipped: PostgreSQL's server binaries (initdb, pg_ctl) are not installed");
            return None;
        };
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!("ezmq-pg-{}", uuid::Uuid::new_v4().simple()));
        let port = free_port();
        let server = PrivatePostgres {
            bin,
            dir,
            port,
            as_postgres,
        };
        let dir = server.dir.display().to_string();
        server.run(
            "initdb",
            &[
                "-D",
                &dir,
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        server.pg_ctl("start");
        Some(server)
    }

    /// The URL of its `postgres` database.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Kills it as a crash would (`pg_ctl stop -m immediate`: no
    /// checkpoint, WAL recovery at the next start) and starts it again on
    /// the same port.
    pub(crate) fn restart(&self) -> Result<(), String> {
        self.try_pg_ctl(&["stop", "-m", "immediate"])?;
        self.try_pg_ctl(&["start"])
    }

    fn pg_ctl(&self, action: &str) {
        if let Err(err) = self.try_pg_ctl(&[action]) {
            panic!("{err}");
        }
    }

    fn try_pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let dir = self.dir.display().to_string();
        let log = self.dir.join("server.log").display().to_string();
        let options = format!("-p {} -c listen_addresses=127.0.0.1 -k {dir}", self.port);
        let mut all = vec!["-D", &dir, "-l", &log, "-w", "-o", &options];
        all.extend_from_slice(args);
        let out = self.command("pg_ctl", &all);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "pg_ctl {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let out = self.command(tool, args);
        assert!(
            out.status.success(),
            "{tool} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn command(&self, tool: &str, args: &[&str]) -> Output {
        let program = self.bin.join(tool);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        command
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {tool}: {e}"))
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.try_pg_ctl(&["stop", "-m", "immediate"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory of `initdb` and `pg_ctl`: on `PATH`, or Debian's
/// `/usr/lib/postgresql/<version>/bin` (the newest).
fn server_bin() -> Option<PathBuf> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return Some(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

use ezmq_test_support::free_port;
