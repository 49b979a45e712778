//! A throwaway PostgreSQL server for a test: `initdb` in a scratch directory, `pg_ctl start` on a
//! free 127.0.0.1 port (no Unix socket, trust authentication, fsync off), `pg_ctl stop -m fast`
//! and the directory removed on drop. A test can stop and restart it, or freeze it (SIGSTOP:
//! connections open, no answers) and thaw it.
//!
//! PostgreSQL refuses to run as root, and tests run as root in CI: the server then runs as the
//! `postgres` user (created by Debian's packages), else `nobody`, through `runuser`, and the
//! scratch directory is handed to that user. The binaries are Debian's
//! (`/usr/lib/postgresql/VERSION/bin`, the newest version; Debian does not put them on PATH),
//! else `initdb` and `pg_ctl` found on PATH.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A running PostgreSQL server, stopped and deleted on drop.
pub struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    user: Option<String>,
    port: u16,
    /// `postgres://bloomgate@127.0.0.1:PORT/postgres`: the superuser `bloomgate` (no password:
    /// loopback trusts) on the default database.
    pub url: String,
    running: bool,
    frozen: bool,
}

/// The superuser `initdb` creates; every URL connects as it.
const SUPERUSER: &str = "bloomgate";

/// The directory holding `initdb` and `pg_ctl`: Debian's newest
/// `/usr/lib/postgresql/VERSION/bin`, else the one on PATH.
pub fn bin_dir() -> Option<PathBuf> {
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    debian.sort();
    if let Some((_, bin)) = debian.pop() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
}

impl Postgres {
    /// Starts a fresh server, or returns None after [`crate::skip_or_fail`] for `test` when
    /// PostgreSQL is not installed (under CI's `BLOOMGATE_NO_SKIP=1` that fails the test).
    /// Panics with the server's log if it does not start.
    pub fn start(test: &str) -> Option<Postgres> {
        let Some(bin) = bin_dir() else {
            crate::skip_or_fail(
                test,
                "PostgreSQL (initdb, pg_ctl) is not installed (bash .ci/setup installs postgresql)",
            );
            return None;
        };
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "bloomgate-pg-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let user = server_user();
        if let Some(user) = &user {
            run(Command::new("chown").arg(user).arg(&dir), "chown");
        }
        let mut pg = Postgres {
            bin,
            dir,
            user,
            port: 0,
            url: String::new(),
            running: false,
            frozen: false,
        };
        pg.as_server_user(&pg.bin.join("initdb"), |c| {
            c.arg("-D").arg(pg.data()).args([
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]);
        })
        .unwrap_or_else(|out| panic!("initdb failed: {out}"));
        // The port can be taken between free_port and the server's bind: try a few.
        for _ in 0..5 {
            pg.port = crate::free_port();
            match pg.pg_ctl_start() {
                Ok(()) => {
                    pg.url = format!("postgres://{SUPERUSER}@127.0.0.1:{}/postgres", pg.port);
                    return Some(pg);
                }
                Err(log) if log.contains("could not bind") || log.contains("already in use") => {}
                Err(log) => panic!("PostgreSQL did not start: {log}"),
            }
        }
        panic!("PostgreSQL did not start: no free port in five tries");
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (`pg_ctl stop -m fast`: open connections are closed); the data stays.
    pub fn stop(&mut self) {
        self.thaw();
        if self.running {
            self.pg_ctl_stop()
                .unwrap_or_else(|out| panic!("pg_ctl stop failed: {out}"));
        }
    }

    /// Starts the stopped server again, on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.pg_ctl_start()
            .unwrap_or_else(|log| panic!("PostgreSQL did not restart: {log}"));
    }

    /// Freezes the server (SIGSTOP to the postmaster and every process it started): its TCP
    /// connections stay open and new ones are accepted by the kernel, but nothing answers — a
    /// server stalled on its storage, swapped out, or stopped in a debugger. [`Self::thaw`] (or
    /// the drop) resumes it.
    pub fn freeze(&mut self) {
        let processes = self.processes();
        signal("STOP", &processes);
        // Started between the listing and the postmaster's stop: stop those too.
        let late: Vec<u32> = self
            .processes()
            .into_iter()
            .filter(|pid| !processes.contains(pid))
            .collect();
        signal("STOP", &late);
        self.frozen = true;
    }

    /// Resumes a frozen server (SIGCONT to the same processes).
    pub fn thaw(&mut self) {
        if self.frozen {
            signal("CONT", &self.processes());
            self.frozen = false;
        }
    }

    /// The postmaster's pid (from `postmaster.pid`) and its children's, postmaster first.
    fn processes(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.data().join("postmaster.pid"))
            .expect("postmaster.pid of a running server");
        let postmaster: u32 = text
            .lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .expect("a pid on postmaster.pid's first line");
        let mut pids = vec![postmaster];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            // `pid (comm) state ppid ...`: the command may hold spaces and parentheses.
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            if ppid == Some(postmaster) {
                pids.push(pid);
            }
        }
        pids
    }

    /// Creates the empty database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        let port = self.port.to_string();
        self.as_server_user(&self.bin.join("createdb"), |c| {
            c.args(["-h", "127.0.0.1", "-p", &port, "-U", SUPERUSER, name]);
        })
        .unwrap_or_else(|out| panic!("createdb {name} failed: {out}"));
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{name}", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn pg_ctl_start(&mut self) -> Result<(), String> {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='' -c fsync=off",
            self.port
        );
        let started = self.as_server_user(&self.bin.join("pg_ctl"), |c| {
            c.arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.log())
                .args(["-w", "-t", "60", "-o", &options, "start"]);
        });
        match started {
            Ok(_) => {
                self.running = true;
                Ok(())
            }
            Err(out) => {
                let log = std::fs::read_to_string(self.log()).unwrap_or_default();
                Err(format!("{out}\n{log}"))
            }
        }
    }

    fn pg_ctl_stop(&mut self) -> Result<(), String> {
        self.running = false;
        self.as_server_user(&self.bin.join("pg_ctl"), |c| {
            c.arg("-D")
                .arg(self.data())
                .args(["-w", "-t", "60", "-m", "fast", "stop"]);
        })
        .map(drop)
    }

    /// Runs `program` as the server's user (directly when not root); Ok(output) if it exits 0,
    /// else Err(its output).
    fn as_server_user(
        &self,
        program: &Path,
        args: impl FnOnce(&mut Command),
    ) -> Result<String, String> {
        let mut command = match &self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        args(&mut command);
        // A scratch directory the server's user owns as its working directory (runuser keeps
        // root's, which that user may not be allowed to read).
        command.current_dir(&self.dir);
        let out = command
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(text)
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.thaw();
        if self.running {
            let _ = self.pg_ctl_stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The user the server runs as when the tests run as root: `postgres`, else `nobody`. None when
/// not root (the server runs as the test's own user).
fn server_user() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return None;
    }
    let exists = |user: &str| {
        Command::new("id")
            .arg(user)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    Some(
        ["postgres", "nobody"]
            .into_iter()
            .find(|user| exists(user))
            .expect("running as root, and neither a `postgres` nor a `nobody` user exists")
            .to_owned(),
    )
}

/// `kill -SIGNAL pids...` (nothing for no pids).
fn signal(name: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let mut kill = Command::new("kill");
    kill.arg(format!("-{name}"))
        .args(pids.iter().map(|pid| pid.to_string()));
    run(&mut kill, &format!("kill -{name}"));
}

fn run(command: &mut Command, what: &str) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    assert!(status.success(), "{what} failed: {status}");
}
