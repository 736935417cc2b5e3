//! A real Redis Cluster of three masters (no replicas) of the test's own: three redis-servers
//! with `--cluster-enabled yes` on free ports, joined by `redis-cli --cluster create`. The test
//! can count keys per master, move slots between masters (`redis-cli --cluster reshard`) while
//! traffic flows, and kill -9 a node and start it again.
//!
//! Everything goes through `redis-cli` (on PATH, like `redis-server`), never the gateway's own
//! Redis client: a fixture that shared the code under test could agree with its bugs. This file
//! is also compiled into `benches/webhook_delivery.rs` (`#[path]`), so it uses nothing else of
//! `support`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one plain `redis-cli` command (PING, CLUSTER INFO, a scan) may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the cluster may take to agree that every slot is served, after a create or a
/// restart. A restarted master is cleared of its FAIL flag only after twice the node timeout.
const SETTLE: Duration = Duration::from_secs(20);

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

    /// Whether this master owns `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

/// One redis-server of the cluster: its port, its directory (its `nodes.conf` and log), and the
/// process while it runs.
struct Node {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The last lines of the node's log, for failure messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

/// The cluster (see the module doc); its nodes are killed on drop.
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
    /// AOF with `appendfsync always` on every node.
    durable: bool,
}

/// A port free now whose cluster bus port (port + 10000) is free too, and not one of `taken`
/// (nor their bus ports). Below 55535 so that the bus port exists.
fn free_pair(taken: &[u16]) -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let clash = taken.iter().any(|&t| {
            [t, t + 10_000].contains(&port) || [t, t + 10_000].contains(&(port + 10_000))
        });
        if port < 55_000
            && !clash
            && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
        {
            return port;
        }
    }
}

/// Run `redis-cli args`, killing it after `limit` (a `--cluster create` waiting for a bus that
/// never answers would otherwise hang the test). `Ok` with its output when it exits 0, `Err`
/// with its output (stdout then stderr) otherwise.
fn cli_within(args: &[&str], limit: Duration) -> Result<String, String> {
    let mut child = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("redis-cli (on PATH?): {e}"))?;
    // Drained on threads: a full pipe would block redis-cli before it exits.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = out.join().unwrap_or_default() + &err.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => Ok(text),
        Some(s) => Err(format!("redis-cli {} ({s}): {text}", args.join(" "))),
        None => Err(format!(
            "redis-cli {} timed out after {limit:?}: {text}",
            args.join(" ")
        )),
    }
}

fn cli(args: &[&str]) -> Result<String, String> {
    cli_within(args, CLI_TIMEOUT)
}

/// `redis-cli -p port args`.
fn cli_at(port: u16, args: &[&str]) -> Result<String, String> {
    let p = port.to_string();
    let mut all = vec!["-p", &p];
    all.extend_from_slice(args);
    cli(&all)
}

/// Start one cluster node on `port`, its `nodes.conf`, data and log in `dir`; `durable`: AOF
/// with `appendfsync always`.
fn spawn(port: u16, dir: &Path, durable: bool) -> Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
        .arg("--cluster-config-file")
        .arg(dir.join("nodes.conf"))
        .args([
            "--save",
            "",
            "--appendonly",
            if durable { "yes" } else { "no" },
        ])
        .args(["--appendfsync", "always"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server on PATH")
}

impl RedisCluster {
    /// Three masters sharing the 16384 slots, every node agreeing the cluster is ok. Retries
    /// with fresh ports when one was taken between choosing it and redis binding it.
    pub fn start() -> RedisCluster {
        Self::start_with(0, false)
    }

    /// Three masters, each with `replicas` replicas (a master killed is failed over to one),
    /// every node durable (AOF, `appendfsync always`) if asked.
    pub fn start_with(replicas: usize, durable: bool) -> RedisCluster {
        let mut errors = Vec::new();
        for _ in 0..3 {
            match Self::try_start(replicas, durable) {
                Ok(c) => return c,
                Err(e) => errors.push(e),
            }
        }
        panic!(
            "a Redis Cluster did not start (redis-server and redis-cli on PATH?):\n{}",
            errors.join("\n---\n")
        );
    }

    fn try_start(replicas: usize, durable: bool) -> Result<RedisCluster, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut c = RedisCluster {
            nodes: Vec::new(),
            dir,
            durable,
        };
        for _ in 0..3 * (1 + replicas) {
            let port = free_pair(&c.ports());
            let node_dir = c.dir.path().join(port.to_string());
            std::fs::create_dir_all(&node_dir).expect("node dir");
            let child = spawn(port, &node_dir, durable);
            c.nodes.push(Node {
                port,
                dir: node_dir,
                child: Some(child),
            });
        }
        // On an error `c` is dropped, and its nodes killed.
        for i in 0..c.nodes.len() {
            c.wait_up(i)?;
        }
        let addrs: Vec<String> = c.ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        let replicas = replicas.to_string();
        args.extend(["--cluster-replicas", &replicas, "--cluster-yes"]);
        cli_within(&args, Duration::from_secs(60))?;
        c.wait_ok(SETTLE)?;
        Ok(c)
    }

    /// Wait until node `i` answers PING; an error at once if its process exited (its port was
    /// taken), or after 10 s.
    fn wait_up(&mut self, i: usize) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let node = &mut self.nodes[i];
        loop {
            if cli_at(node.port, &["PING"]).is_ok_and(|o| o.contains("PONG")) {
                return Ok(());
            }
            let running = node
                .child
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
            if !running || Instant::now() > deadline {
                return Err(format!(
                    "redis-server on port {} did not come up:\n{}",
                    node.port,
                    node.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every node's port, in start order, killed nodes included.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// `redis://127.0.0.1:P` for every node (the seed list a cluster client takes).
    pub fn urls(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect()
    }

    /// Every live node says `cluster_state:ok` and sees all 16384 slots assigned.
    fn wait_ok(&self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let infos: Vec<(u16, Result<String, String>)> = self
                .live_ports()
                .into_iter()
                .map(|p| (p, cli_at(p, &["CLUSTER", "INFO"])))
                .collect();
            let ok = infos.iter().all(|(_, i)| {
                i.as_ref().is_ok_and(|i| {
                    i.contains("cluster_state:ok") && i.contains("cluster_slots_assigned:16384")
                })
            });
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                let infos: Vec<String> = infos
                    .iter()
                    .map(|(p, i)| {
                        let i = i.as_ref().unwrap_or_else(|e| e);
                        let short: Vec<&str> = i
                            .lines()
                            .filter(|l| l.starts_with("cluster_s") || l.starts_with("cluster_k"))
                            .collect();
                        format!("{p}: {}", short.join(" "))
                    })
                    .collect();
                return Err(format!(
                    "the cluster did not reach cluster_state:ok in {limit:?}: {}",
                    infos.join("; ")
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The masters and their slots, from `CLUSTER NODES` on the first live node, in port order.
    /// A killed master is still listed, with its slots (nothing takes them over: no replicas).
    pub fn masters(&self) -> Vec<Master> {
        let port = *self.live_ports().first().expect("a live node");
        let text = cli_at(port, &["CLUSTER", "NODES"]).expect("CLUSTER NODES");
        let mut out: Vec<Master> = text.lines().filter_map(parse_master).collect();
        out.sort_by_key(|m| m.port);
        out
    }

    /// How many keys matching `pattern` each live master holds, by port (SCAN on each). A
    /// killed master is left out.
    pub fn keys_per_master(&self, pattern: &str) -> Vec<(u16, usize)> {
        let live = self.live_ports();
        self.masters()
            .iter()
            .filter(|m| live.contains(&m.port))
            .map(|m| {
                let keys = cli_at(m.port, &["--scan", "--pattern", pattern]).expect("scan");
                (m.port, keys.lines().filter(|l| !l.is_empty()).count())
            })
            .collect()
    }

    /// Move `slots` slots from one master to another (keys and all, with MIGRATE), as an
    /// operator would, then wait until every node says `cluster_state:ok` and
    /// `redis-cli --cluster check` passes. Blocking (seconds): run it on a blocking thread
    /// (`tokio::task::spawn_blocking`) while traffic flows. `Err` carries redis-cli's output.
    pub fn reshard(&self, from_port: u16, to_port: u16, slots: usize) -> Result<(), String> {
        let masters = self.masters();
        let id = |port: u16| {
            masters
                .iter()
                .find(|m| m.port == port)
                .map(|m| m.id.clone())
                .ok_or_else(|| format!("no master on port {port}: {masters:?}"))
        };
        let (from, to) = (id(from_port)?, id(to_port)?);
        let seed = format!("127.0.0.1:{from_port}");
        let n = slots.to_string();
        cli_within(
            &[
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
                // Keys per MIGRATE: the default 10 makes a loaded slot slow to move.
                "--cluster-pipeline",
                "100",
            ],
            Duration::from_secs(300),
        )?;
        self.wait_ok(SETTLE)?;
        self.wait_check(SETTLE)
    }

    /// Wait until `redis-cli --cluster check` passes: every slot covered, none open (migrating
    /// or importing), and every node agreeing on who owns what. The new owner's epoch reaches
    /// the other nodes by gossip, so a check right after a move may briefly see disagreement.
    fn wait_check(&self, limit: Duration) -> Result<(), String> {
        let seed = format!(
            "127.0.0.1:{}",
            self.live_ports().first().expect("a live node")
        );
        let deadline = Instant::now() + limit;
        loop {
            match cli(&["--cluster", "check", &seed]) {
                Ok(out) if !out.contains("[ERR]") && !out.contains("[WARNING]") => return Ok(()),
                Ok(out) | Err(out) if Instant::now() > deadline => return Err(out),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    fn node(&mut self, port: u16) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// kill -9 the node on `port`: no shutdown, no save. With no replicas its slots stay
    /// unserved; after the node timeout (2 s) the others mark it failed and, as
    /// `cluster-require-full-coverage` is on, answer CLUSTERDOWN for every slot.
    pub fn kill_node(&mut self, port: u16) {
        self.node(port).kill();
    }

    /// Start the node on `port` again (killing it first if it still runs), with the same
    /// `nodes.conf` and directory: it rejoins as the same node id with the same slots, and this
    /// waits until every node says `cluster_state:ok` again (a few seconds: the others clear
    /// its FAIL flag only after twice the node timeout). Its keys are gone: no RDB, no AOF, so
    /// a restarted master comes back owning its slots, empty.
    pub fn restart_node(&mut self, port: u16) {
        let node = self.node(port);
        node.kill();
        let durable = self.durable;
        let node = self.node(port);
        node.child = Some(spawn(port, &node.dir, durable));
        let i = self
            .nodes
            .iter()
            .position(|n| n.port == port)
            .expect("the node");
        if let Err(e) = self.wait_up(i) {
            panic!("{e}");
        }
        if let Err(e) = self.wait_ok(SETTLE) {
            panic!("{e}\nlog of {port}:\n{}", self.nodes[i].log_tail());
        }
    }
}

/// A master's line of `CLUSTER NODES`: `<id> <ip:port@bus> <flags> <master> <ping> <pong>
/// <epoch> <link> <slot or range>...`; open slots (`[slot->-id]`) are skipped.
fn parse_master(line: &str) -> Option<Master> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if !f.get(2)?.split(',').any(|flag| flag == "master") {
        return None;
    }
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
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
    }
}

/// `SET key value` through the cluster (`-c` follows MOVED to the owner).
#[cfg(test)]
fn set(c: &RedisCluster, key: &str) {
    let out = cli_at(c.ports()[0], &["-c", "SET", key, "v"]).expect("SET");
    assert!(out.contains("OK"), "SET {key}: {out}");
}

#[test]
fn a_cluster_starts_covers_every_slot_and_reshards() {
    let c = RedisCluster::start();
    let masters = c.masters();
    assert_eq!(masters.len(), 3, "{masters:?}");
    assert_eq!(c.urls().len(), 3);
    assert_eq!(
        masters.iter().map(Master::slot_count).sum::<usize>(),
        16_384
    );
    assert!((0..16_384).all(|s| masters.iter().filter(|m| m.owns(s)).count() == 1));
    for i in 0..30 {
        set(&c, &format!("self:{i}"));
    }
    let per = c.keys_per_master("self:*");
    assert_eq!(per.iter().map(|&(_, n)| n).sum::<usize>(), 30, "{per:?}");
    assert!(per.iter().all(|&(_, n)| n > 0), "{per:?}");

    let before: Vec<usize> = masters.iter().map(Master::slot_count).collect();
    c.reshard(masters[0].port, masters[1].port, 100)
        .expect("reshard");
    let after = c.masters();
    let counts: Vec<usize> = after.iter().map(Master::slot_count).collect();
    assert_eq!(
        counts,
        [before[0] - 100, before[1] + 100, before[2]],
        "{after:?}"
    );
    // Keys moved with their slots.
    let per = c.keys_per_master("self:*");
    assert_eq!(per.iter().map(|&(_, n)| n).sum::<usize>(), 30, "{per:?}");
}

#[test]
fn a_killed_master_rejoins_with_its_slots_and_without_its_keys() {
    let mut c = RedisCluster::start();
    for i in 0..30 {
        set(&c, &format!("k:{i}"));
    }
    let masters = c.masters();
    let victim = masters[2].port;
    let held = c
        .keys_per_master("k:*")
        .into_iter()
        .find(|&(p, _)| p == victim)
        .expect("the victim's count")
        .1;
    assert!(held > 0);
    c.kill_node(victim);
    // The others notice after the node timeout.
    let other = masters[0].port;
    let deadline = Instant::now() + Duration::from_secs(15);
    while !cli_at(other, &["CLUSTER", "INFO"]).is_ok_and(|i| i.contains("cluster_state:fail")) {
        assert!(Instant::now() < deadline, "the kill was never noticed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.keys_per_master("k:*").len(), 2);
    c.restart_node(victim);
    let back = c.masters();
    assert_eq!(
        back.iter().map(|m| (&m.id, &m.slots)).collect::<Vec<_>>(),
        masters
            .iter()
            .map(|m| (&m.id, &m.slots))
            .collect::<Vec<_>>()
    );
    let per = c.keys_per_master("k:*");
    assert_eq!(per.len(), 3);
    assert_eq!(
        per.iter().map(|&(_, n)| n).sum::<usize>(),
        30 - held,
        "{per:?}"
    );
}
