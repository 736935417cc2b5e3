//! A redis-server that speaks TLS only, with a certificate from a CA of the test's own
//! (`support::tls`), and one ACL user with a password; the `default` user is off, as on a
//! managed Redis.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::tls::{Ca, Files};

/// The ACL user's password.
const PASSWORD: &str = "tls-acl-pw-5c1d";

pub struct RedisTls {
    child: Option<Child>,
    pub port: u16,
    ca_file: String,
    _files: Files,
    _dir: tempfile::TempDir,
}

fn cli(port: u16, ca: &str, auth: &[&str], args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args([
            "--tls",
            "--cacert",
            ca,
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .args(auth)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

impl RedisTls {
    pub fn start() -> RedisTls {
        let ca = Ca::new("a2a-gateway test redis CA");
        let leaf = ca.server();
        let files = Files::new();
        let ca_file = files.write("redis-ca.pem", &ca.pem());
        let cert = files.write("redis.pem", &leaf.cert_pem);
        let key = files.write("redis.key", &leaf.key_pem);
        let dir = tempfile::tempdir().expect("temp dir");
        // The ACL: the gateway's user, and `default` off.
        let acl = dir.path().join("users.acl");
        std::fs::write(
            &acl,
            format!("user gw on >{PASSWORD} ~* &* +@all\nuser default off\n"),
        )
        .expect("acl file");
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let child = Command::new("redis-server")
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--tls-cert-file", &cert, "--tls-key-file", &key])
                .args(["--tls-ca-cert-file", &ca_file, "--tls-auth-clients", "no"])
                .arg("--aclfile")
                .arg(&acl)
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server on PATH");
            let mut s = RedisTls {
                child: Some(child),
                port,
                ca_file: ca_file.clone(),
                _files: Files::new(),
                _dir: tempfile::tempdir().expect("temp dir"),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if s.ping("gw", PASSWORD) {
                    s._files = files;
                    s._dir = dir;
                    return s;
                }
                if let Some(Ok(Some(_))) = s.child.as_mut().map(|c| c.try_wait()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
        }
        panic!("redis-server with TLS did not start");
    }

    /// PING as `user` with `password`, over TLS, trusting the test CA.
    pub fn ping(&self, user: &str, password: &str) -> bool {
        cli(
            self.port,
            &self.ca_file,
            &["--user", user, "--pass", password, "--no-auth-warning"],
            &["PING"],
        )
        .is_some_and(|o| o.contains("PONG"))
    }

    /// `rediss://gw:PASSWORD@127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("rediss://gw:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    pub fn password(&self) -> &str {
        PASSWORD
    }

    /// The PEM of the CA that signed the server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        PathBuf::from(&self.ca_file)
    }
}

impl Drop for RedisTls {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn only_the_acl_user_gets_in_over_tls() {
    let r = RedisTls::start();
    assert!(r.ping("gw", PASSWORD));
    assert!(!r.ping("gw", "wrong"));
    assert!(!r.ping("default", ""));
}
