//! A real nginx (Debian's package) as a plain reverse proxy in front of several upstreams, for
//! comparing the gateway with what operators put in front of replicas without it: one process
//! (`master_process off`) in the foreground, its prefix, config and logs in a temporary
//! directory, killed when dropped.
//!
//! Nothing is skipped silently: without nginx every user of this module fails with the command
//! that installs it (what `scripts/test` runs).

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long nginx gets to accept connections.
const DEADLINE: Duration = Duration::from_secs(20);

/// A running nginx, killed when dropped.
pub struct Nginx {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    dir: tempfile::TempDir,
}

/// The nginx binary: on PATH, else Debian's `/usr/sbin/nginx` (not on a user's PATH).
fn binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("nginx"))
            .find(|p| p.is_file())
    });
    let found = on_path.or_else(|| {
        let p = PathBuf::from("/usr/sbin/nginx");
        p.is_file().then_some(p)
    });
    found.unwrap_or_else(|| {
        panic!(
            "nginx is not installed: `apt-get install -y nginx` (scripts/test installs it when \
             run as root)"
        )
    })
}

/// A free port on loopback (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Nginx {
    /// nginx on a free port of 127.0.0.1 proxying every request to `upstreams` (`host:port`
    /// each) in turn: its default round-robin, HTTP/1.1 to the upstreams, nothing buffered (so
    /// SSE streams pass as they come), no retry on another upstream after an error.
    pub fn round_robin(upstreams: &[&str]) -> Nginx {
        assert!(!upstreams.is_empty(), "nginx needs at least one upstream");
        let nginx = binary();
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let servers: String = upstreams
            .iter()
            .map(|u| format!("        server {u};\n"))
            .collect();
        let conf = format!(
            "master_process off;\n\
             worker_processes 1;\n\
             pid nginx.pid;\n\
             error_log error.log warn;\n\
             events {{\n    worker_connections 4096;\n}}\n\
             http {{\n\
             \x20   access_log off;\n\
             \x20   client_body_temp_path client_body;\n\
             \x20   proxy_temp_path proxy;\n\
             \x20   fastcgi_temp_path fastcgi;\n\
             \x20   uwsgi_temp_path uwsgi;\n\
             \x20   scgi_temp_path scgi;\n\
             \x20   upstream replicas {{\n{servers}        keepalive 64;\n    }}\n\
             \x20   server {{\n\
             \x20       listen 127.0.0.1:{port};\n\
             \x20       location / {{\n\
             \x20           proxy_pass http://replicas;\n\
             \x20           proxy_http_version 1.1;\n\
             \x20           proxy_set_header Connection \"\";\n\
             \x20           proxy_set_header Host $host;\n\
             \x20           proxy_buffering off;\n\
             \x20           proxy_request_buffering off;\n\
             \x20           proxy_read_timeout 300s;\n\
             \x20           proxy_next_upstream off;\n\
             \x20       }}\n\
             \x20   }}\n\
             }}\n"
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("write nginx.conf");
        let child = Command::new(&nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&conf_path)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", nginx.display()));
        let mut proxy = Nginx {
            child,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        };
        let start = Instant::now();
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return proxy;
            }
            if let Ok(Some(status)) = proxy.child.try_wait() {
                panic!("nginx exited {status} before listening:\n{}", proxy.log());
            }
            assert!(
                start.elapsed() < DEADLINE,
                "nginx not listening on {port} within {DEADLINE:?}:\n{}",
                proxy.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What nginx wrote in its error log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
