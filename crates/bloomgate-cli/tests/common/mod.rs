//! Shared by the test binaries that need a real `bloomgate serve`: start it on a free loopback
//! port with `appendfsync always` and wait until it has loaded, kill it on drop.
#![allow(dead_code)] // each test binary uses a subset of the helpers

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub port: u16,
}

impl Server {
    pub fn start(dir: &Path) -> Server {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new(env!("CARGO_BIN_EXE_bloomgate"))
                .args([
                    "serve",
                    "--appendfsync",
                    "always",
                    "--port",
                    &port.to_string(),
                ])
                .arg("--dir")
                .arg(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                    let _ = s.write_all(b"PING\r\n");
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    let mut reply = Vec::new();
                    let _ = s.read_to_end(&mut reply);
                    if reply.ends_with(b"+PONG\r\n") {
                        return Server { child, port };
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("server did not start");
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bloomgate-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
