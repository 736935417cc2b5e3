//! A redis-server of the test's own, on a free port, that the test can kill (-9) and restart
//! empty on the same port. Never the machine's shared Redis on 6379.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    /// AOF with `appendfsync always`: what it acknowledged survives a kill -9 and restart.
    durable: bool,
    /// More arguments (`--replicaof`).
    extra: Vec<String>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl RedisServer {
    pub fn start() -> RedisServer {
        Self::start_with(false)
    }

    /// A server with AOF and `appendfsync always`, for [`RedisServer::restart`].
    pub fn start_durable() -> RedisServer {
        Self::start_with(true)
    }

    /// A durable replica of `master`.
    pub fn start_replica_of(master: &RedisServer) -> RedisServer {
        let of = vec![
            "--replicaof".into(),
            "127.0.0.1".into(),
            master.port.to_string(),
        ];
        Self::start_with_args(true, of)
    }

    fn start_with(durable: bool) -> RedisServer {
        Self::start_with_args(durable, Vec::new())
    }

    fn start_with_args(durable: bool, extra: Vec<String>) -> RedisServer {
        // The port is free when read back; another process could take it before redis binds,
        // so retry with a fresh one.
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let mut s = RedisServer {
                child: None,
                port: free_port(),
                dir,
                durable,
                extra: extra.clone(),
            };
            if s.spawn() {
                return s;
            }
        }
        panic!("redis-server did not start (is it on PATH?)");
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                if self.durable { "yes" } else { "no" },
                "--appendfsync",
                "always",
            ])
            .args(&self.extra)
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return true;
            }
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// PING over a raw socket: answers +PONG when the server is up.
    pub fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect_timeout(
            &([127, 0, 0, 1], self.port).into(),
            Duration::from_millis(200),
        ) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A `[redis]` table for this server, keys under `prefix`.
    pub fn config(&self, prefix: &str) -> a2a_gateway::config::RedisConfig {
        a2a_gateway::config::RedisConfig {
            url: self.url(),
            prefix: prefix.into(),
            ..Default::default()
        }
    }

    /// The body of a `[redis]` table in a config file for this server.
    pub fn toml(&self) -> String {
        format!("url = \"{}\"\n", self.url())
    }

    /// `redis-cli -p PORT ARGS...`, asserted to succeed; its output, trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// kill -9: no shutdown, no save.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kill -9, then start again on the same port and directory: a durable server comes back
    /// with everything it acknowledged.
    pub fn restart(&mut self) {
        self.kill();
        assert!(self.spawn(), "redis-server restarted on port {}", self.port);
    }

    /// Kill, then start again on the same port with nothing in it.
    pub fn restart_empty(&mut self) {
        self.kill();
        assert!(self.spawn(), "redis-server restarted on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
