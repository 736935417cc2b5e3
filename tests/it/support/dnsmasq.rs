//! A dnsmasq of the test's own on 127.0.0.1 and a free port (UDP and TCP), the nameserver of
//! `discover = "dns"` tests: it answers the names [`Dnsmasq::set`] gives with TTL 0, NXDOMAIN
//! for any other name under `.test`, and REFUSED elsewhere (it has no upstream). Never the
//! machine's resolver: no /etc/hosts, no resolv.conf, no config file.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

pub struct Dnsmasq {
    pub addr: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
    hosts: PathBuf,
    /// One message each time dnsmasq has read the hosts file (its log line `read FILE - N names`).
    reads: Mutex<Receiver<()>>,
    names: Mutex<BTreeMap<String, Vec<IpAddr>>>,
}

/// A port free on 127.0.0.1 for both TCP and UDP now.
fn free_port() -> u16 {
    loop {
        let port = super::idp::free_port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// dnsmasq from PATH, or from /usr/sbin where Debian puts it, off a user's PATH.
fn program() -> &'static str {
    let sbin = "/usr/sbin/dnsmasq";
    let on_path = Command::new("dnsmasq").arg("--version").output().is_ok();
    if !on_path && std::path::Path::new(sbin).exists() {
        sbin
    } else {
        "dnsmasq"
    }
}

impl Dnsmasq {
    /// Started with no names, and answering.
    pub fn start() -> Dnsmasq {
        // The port is free when read back; another process could take it before dnsmasq binds
        // (dnsmasq then exits), so retry with a fresh one.
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let hosts = dir.path().join("hosts");
            std::fs::write(&hosts, "").expect("hosts file");
            let port = free_port();
            let mut child = Command::new(program())
                .args([
                    "--keep-in-foreground",
                    "--conf-file=/dev/null",
                    "--no-resolv",
                    "--no-hosts",
                    "--bind-interfaces",
                    "--listen-address=127.0.0.1",
                    "--local=/test/",
                    "--local-ttl=0",
                    "--log-facility=-",
                    // As root it would otherwise run as `dnsmasq`, which cannot read the temp dir.
                    "--user=root",
                    "--pid-file=",
                ])
                .arg(format!("--port={port}"))
                .arg(format!("--addn-hosts={}", hosts.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("dnsmasq on PATH (Debian package dnsmasq)");
            let stderr = child.stderr.take().expect("stderr");
            let (tx, rx) = std::sync::mpsc::channel();
            let read_line = format!("read {} - ", hosts.display());
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if line.contains(&read_line) && tx.send(()).is_err() {
                        break;
                    }
                }
            });
            let d = Dnsmasq {
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                child,
                _dir: dir,
                hosts,
                reads: Mutex::new(rx),
                names: Mutex::new(BTreeMap::new()),
            };
            // Its sockets are bound before it reads the hosts file the first time.
            if d.read_again() {
                return d;
            }
        }
        panic!("dnsmasq did not start (is it on PATH?)");
    }

    /// `name` resolves to `addrs` from now on (none: NXDOMAIN). The hosts file is rewritten
    /// whole (renamed into place, never read half-written) and dnsmasq sent SIGHUP, which
    /// rereads it and clears its cache; this returns once it has read it.
    pub fn set(&self, name: &str, addrs: &[IpAddr]) {
        let mut names = self.names.lock().expect("names");
        names.insert(name.to_owned(), addrs.to_vec());
        let text: String = names
            .iter()
            .flat_map(|(n, a)| a.iter().map(move |a| format!("{a} {n}\n")))
            .collect();
        let next = self.hosts.with_extension("next");
        std::fs::write(&next, text).expect("hosts file");
        std::fs::rename(&next, &self.hosts).expect("hosts file renamed");
        let ok = Command::new("kill")
            .arg("-HUP")
            .arg(self.child.id().to_string())
            .status()
            .expect("kill(1) runs")
            .success();
        assert!(ok, "kill -HUP dnsmasq");
        assert!(
            self.read_again(),
            "dnsmasq rereads its hosts file on SIGHUP"
        );
    }

    /// Whether dnsmasq logs one more read of the hosts file within 10 s (false: it exited).
    fn read_again(&self) -> bool {
        let reads = self.reads.lock().expect("reads");
        match reads.recv_timeout(Duration::from_secs(10)) {
            Ok(()) => true,
            Err(RecvTimeoutError::Disconnected) => false,
            Err(RecvTimeoutError::Timeout) => panic!("dnsmasq silent for 10 s"),
        }
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
