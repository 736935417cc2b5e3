//! A redis-server that speaks TLS only (`--port 0`), with a certificate for `127.0.0.1` and
//! `localhost` from a CA of the test's own (`support::tls`), and one ACL user with a password;
//! the `default` user is off, as on a managed Redis. The users come from an ACL file read at
//! start, so the server never accepts anyone else, not even during setup.
//!
//! Checks go through `redis-cli --tls`, never the gateway's own Redis client.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::tls::{Ca, Files};

/// The ACL user the gateway connects as.
const USER: &str = "gw";
/// The ACL user's password.
const PASSWORD: &str = "tls-acl-pw-5c1d";

pub struct RedisTls {
    child: Option<Child>,
    /// The TLS port (there is no plaintext port).
    pub port: u16,
    ca_file: String,
    /// The CA, server certificate and key files; removed on drop.
    _files: Files,
    /// The ACL file and the server's working directory; removed on drop.
    _dir: tempfile::TempDir,
}

/// `redis-cli --tls` towards `127.0.0.1:port`, trusting `ca`, with `args`; its stdout and
/// stderr (redis-cli exits 0 even when the server answers an error), or `None` when it could
/// not run or took over 10 s.
fn cli(port: u16, ca: &str, args: &[&str]) -> Option<String> {
    let mut child = Command::new("redis-cli")
        .args(["--tls", "--cacert", ca, "-h", "127.0.0.1"])
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    // A handshake that never completes must not hang the test.
    let deadline = Instant::now() + Duration::from_secs(10);
    while matches!(child.try_wait(), Ok(None)) {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

impl RedisTls {
    /// Start the server on a free port and wait (at most 10 s) until the ACL user's PING is
    /// answered over TLS. Retries with a fresh port when one was taken before redis bound it.
    pub fn start() -> RedisTls {
        let ca = Ca::new("a2a-gateway test redis CA");
        let leaf = ca.server();
        let files = Files::new();
        let ca_file = files.write("redis-ca.pem", &ca.pem());
        let cert = files.write("redis.pem", &leaf.cert_pem);
        let key = files.write("redis.key", &leaf.key_pem);
        let dir = tempfile::tempdir().expect("temp dir");
        let acl = dir.path().join("users.acl");
        std::fs::write(
            &acl,
            format!("user {USER} on >{PASSWORD} ~* &* +@all\nuser default off\n"),
        )
        .expect("acl file");
        let mut s = RedisTls {
            child: None,
            port: 0,
            ca_file,
            _files: files,
            _dir: dir,
        };
        for _ in 0..5 {
            s.port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let child = Command::new("redis-server")
                .args(["--port", "0", "--tls-port", &s.port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--tls-cert-file", &cert, "--tls-key-file", &key])
                .args(["--tls-ca-cert-file", &s.ca_file])
                .args(["--tls-auth-clients", "no"])
                .arg("--aclfile")
                .arg(&acl)
                .arg("--dir")
                .arg(s._dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server on PATH");
            s.child = Some(child);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if s.ping(USER, PASSWORD) {
                    return s;
                }
                let running = s
                    .child
                    .as_mut()
                    .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
                if !running {
                    break;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
            s.kill();
        }
        panic!("redis-server with TLS did not start (built with TLS? on PATH?)");
    }

    /// What `PING` as `user` with `password`, over TLS trusting the test CA, prints: `PONG`, or
    /// the refusal (`WRONGPASS`, `NOAUTH`).
    pub fn ping_output(&self, user: &str, password: &str) -> String {
        cli(
            self.port,
            &self.ca_file,
            &[
                "--user",
                user,
                "--pass",
                password,
                "--no-auth-warning",
                "PING",
            ],
        )
        .unwrap_or_default()
    }

    /// `PING` as `user` with `password`, over TLS trusting the test CA, answers `PONG`.
    pub fn ping(&self, user: &str, password: &str) -> bool {
        self.ping_output(user, password).contains("PONG")
    }

    /// `rediss://gw:PASSWORD@127.0.0.1:PORT` (the certificate names `127.0.0.1` as well as
    /// `localhost`).
    pub fn url(&self) -> String {
        format!("rediss://{USER}:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// The ACL user's name (`gw`).
    pub fn user(&self) -> &str {
        USER
    }

    pub fn password(&self) -> &str {
        PASSWORD
    }

    /// The PEM of the CA that signed the server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        PathBuf::from(&self.ca_file)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisTls {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn only_the_acl_user_gets_in_over_tls() {
    let r = RedisTls::start();
    assert!(r.url().starts_with("rediss://gw:"));
    assert!(r.ca_file().is_file());
    let ok = r.ping_output(r.user(), r.password());
    assert!(ok.contains("PONG"), "{ok}");
    // Refused by the server (not a broken handshake): it says why.
    let wrong = r.ping_output(USER, "wrong-password");
    assert!(
        !wrong.contains("PONG") && wrong.contains("WRONGPASS"),
        "{wrong}"
    );
    let default = r.ping_output("default", "anything");
    assert!(
        !default.contains("PONG") && default.contains("WRONGPASS"),
        "{default}"
    );
    // No credentials at all: `default` is off, so the connection is not authenticated.
    let anonymous = cli(r.port, &r.ca_file, &["PING"]).expect("redis-cli");
    assert!(anonymous.contains("NOAUTH"), "{anonymous}");
    // Plaintext on the TLS port gets no answer.
    let plain = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &r.port.to_string(), "PING"])
        .stdin(Stdio::null())
        .output()
        .expect("redis-cli");
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("PONG"));
}
