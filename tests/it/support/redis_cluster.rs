//! A real Redis Cluster of three masters (no replicas) of the test's own: three redis-servers
//! with `--cluster-enabled yes` on free ports, joined by `redis-cli --cluster create`. The test
//! can count keys per master, move slots between masters (`redis-cli --cluster reshard`) while
//! traffic flows, and kill -9 a node.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One master: its node id, port and the slots it owns.
#[derive(Debug, Clone)]
pub struct Master {
    pub id: String,
    pub port: u16,
    /// Inclusive slot ranges.
    pub slots: Vec<(u16, u16)>,
}

impl Master {
    pub fn slot_count(&self) -> usize {
        self.slots
            .iter()
            .map(|&(a, b)| usize::from(b - a) + 1)
            .sum()
    }
}

/// The cluster (see the module doc); its nodes are killed on drop.
pub struct RedisCluster {
    nodes: Vec<(u16, Option<Child>)>,
    _dir: tempfile::TempDir,
}

/// A port free now whose cluster bus port (port + 10000) is free too.
fn free_pair() -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

fn cli(args: &[&str]) -> Result<String, String> {
    let out = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("redis-cli: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

fn spawn(port: u16, dir: &std::path::Path) -> Child {
    let node_dir = dir.join(port.to_string());
    std::fs::create_dir_all(&node_dir).expect("node dir");
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
        .args(["--cluster-config-file", "nodes.conf"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&node_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server on PATH")
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        for _ in 0..3 {
            if let Some(c) = Self::try_start() {
                return c;
            }
        }
        panic!("a Redis Cluster did not start (redis-server and redis-cli on PATH?)");
    }

    fn try_start() -> Option<RedisCluster> {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let port = free_pair();
            nodes.push((port, Some(spawn(port, dir.path()))));
        }
        let c = RedisCluster { nodes, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !c
            .ports()
            .iter()
            .all(|p| cli(&["-p", &p.to_string(), "PING"]).is_ok_and(|o| o.contains("PONG")))
        {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let addrs: Vec<String> = c.ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        cli(&args).ok()?;
        c.wait_ok(Duration::from_secs(20)).ok()?;
        Some(c)
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|(p, _)| *p).collect()
    }

    pub fn urls(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// Every live node says `cluster_state:ok` and sees all 16384 slots assigned.
    fn wait_ok(&self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let ok = self
                .nodes
                .iter()
                .filter(|(_, c)| c.is_some())
                .all(|(p, _)| {
                    cli(&["-p", &p.to_string(), "CLUSTER", "INFO"]).is_ok_and(|i| {
                        i.contains("cluster_state:ok") && i.contains("cluster_slots_assigned:16384")
                    })
                });
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("the cluster did not reach cluster_state:ok".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The masters and their slots, from `CLUSTER NODES`, in port order.
    pub fn masters(&self) -> Vec<Master> {
        let text =
            cli(&["-p", &self.nodes[0].0.to_string(), "CLUSTER", "NODES"]).expect("CLUSTER NODES");
        let mut out: Vec<Master> = text
            .lines()
            .filter(|l| l.contains("master"))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let port = f.get(1)?.split([':', '@']).nth(1)?.parse().ok()?;
                let slots = f
                    .iter()
                    .skip(8)
                    .filter(|s| !s.starts_with('['))
                    .filter_map(|s| match s.split_once('-') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => s.parse().ok().map(|n| (n, n)),
                    })
                    .collect();
                Some(Master {
                    id: f.first()?.to_string(),
                    port,
                    slots,
                })
            })
            .collect();
        out.sort_by_key(|m| m.port);
        out
    }

    /// How many keys matching `pattern` each master holds, by port.
    pub fn keys_per_master(&self, pattern: &str) -> Vec<(u16, usize)> {
        self.masters()
            .iter()
            .map(|m| {
                let keys = cli(&["-p", &m.port.to_string(), "--scan", "--pattern", pattern])
                    .expect("scan");
                (m.port, keys.lines().filter(|l| !l.is_empty()).count())
            })
            .collect()
    }

    /// Move `slots` slots from one master to another (keys and all, with MIGRATE), as an
    /// operator would; blocking: run it on a blocking thread while traffic flows.
    pub fn reshard(&self, from_port: u16, to_port: u16, slots: usize) -> Result<(), String> {
        let masters = self.masters();
        let id = |port: u16| {
            masters
                .iter()
                .find(|m| m.port == port)
                .map(|m| m.id.clone())
                .ok_or_else(|| format!("no master on port {port}"))
        };
        let (from, to) = (id(from_port)?, id(to_port)?);
        let seed = format!("127.0.0.1:{from_port}");
        let n = slots.to_string();
        cli(&[
            "--cluster",
            "reshard",
            &seed,
            "--cluster-from",
            &from,
            "--cluster-to",
            &to,
            "--cluster-slots",
            &n,
            "--cluster-yes",
            "--cluster-pipeline",
            "100",
        ])?;
        self.wait_ok(Duration::from_secs(30))?;
        cli(&["--cluster", "check", &seed]).map(|_| ())
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.nodes {
            if let Some(mut c) = c.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

#[test]
fn a_cluster_starts_covers_every_slot_and_reshards() {
    let c = RedisCluster::start();
    let masters = c.masters();
    assert_eq!(masters.len(), 3, "{masters:?}");
    assert_eq!(
        masters.iter().map(Master::slot_count).sum::<usize>(),
        16_384
    );
    let before = masters[1].slot_count();
    c.reshard(masters[0].port, masters[1].port, 100)
        .expect("reshard");
    let after = c.masters();
    assert_eq!(after[1].slot_count(), before + 100, "{after:?}");
    assert_eq!(after.iter().map(Master::slot_count).sum::<usize>(), 16_384);
}
