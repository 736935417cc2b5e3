//! An agent's replicas by DNS (`discover = "dns"`): every A and AAAA address its name has, asked
//! of the system resolver or of the `[discovery] nameserver` the operator names.
//!
//! A small client here rather than a resolver crate: the gateway asks one kind of question (the
//! addresses of one name), wants no cache (it re-resolves on its own timer,
//! `discover_interval_ms`, and a cache would only hold back a change of replicas), and a
//! resolver crate brings a dependency tree for what fits in this file. The nameserver is asked
//! over UDP, once more when it does not answer in time, and over TCP when its answer is
//! truncated; EDNS(0) offers it 1232 bytes over UDP (DNS flag day 2020: no fragments).
//!
//! A reply is untrusted input: every slice is bounds-checked, compression pointers are followed
//! at most [`MAX_HOPS`] times, and a datagram that is not a reply to the query asked (its id, its
//! question) is ignored rather than believed, as a spoofed one would be.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;
/// What one UDP reply may be, read whole; a longer one is cut and fails to parse.
const UDP_MAX: usize = 4096;
/// The EDNS(0) record after the question: root name, type OPT (41), 1232 bytes (0x04D0) of UDP
/// payload, no extended RCODE or flags, no options.
const OPT: [u8; 11] = [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0];
/// Compression pointers followed in one name: more is a loop, or an attack.
const MAX_HOPS: usize = 16;

/// Why a name gave no replicas. The caller keeps the replicas it had and says which name this was.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DnsError {
    /// NXDOMAIN: a name removed, or misspelt.
    #[error("the name does not exist (NXDOMAIN)")]
    NoSuchName,
    /// The name exists with no A or AAAA record; not taken as "no replicas".
    #[error("the name has no A or AAAA record")]
    NoAddresses,
    /// Another RCODE than NOERROR and NXDOMAIN: SERVFAIL, REFUSED...
    #[error("the nameserver answered {} (RCODE {})", rcode_name(.0), .0)]
    Rcode(u8),
    /// No answer in time (from the nameserver, after one retry over UDP, or the system resolver).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// A reply to our query that cannot be read: what is wrong with it.
    #[error("the nameserver's reply is malformed: {0}")]
    Malformed(&'static str),
    /// The host cannot be asked for: an empty or overlong label, non-ASCII, over 255 bytes.
    #[error("{0:?} is not a DNS name (labels of 1 to 63 ASCII bytes, 255 bytes in all)")]
    InvalidName(String),
    /// The socket to the nameserver failed (an ICMP port unreachable, a reset TCP connection).
    #[error("talking to the nameserver: {0}")]
    Io(Arc<io::Error>),
    /// The system resolver (`getaddrinfo`) failed; its own message, NXDOMAIN included.
    #[error("the system resolver: {0}")]
    System(Arc<io::Error>),
}

fn rcode_name(code: &u8) -> &'static str {
    match code {
        1 => "FORMERR",
        2 => "SERVFAIL",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => "an error",
    }
}

fn io_error(e: io::Error) -> DnsError {
    DnsError::Io(Arc::new(e))
}

/// Every address `host` resolves to, each with `port`, sorted and without duplicates: an IP
/// literal (bracketed or not) as itself, otherwise through the system resolver, or A and AAAA
/// queries to `nameserver`. Each exchange has `timeout` (a UDP query twice). No address at all
/// is an error ([`DnsError::NoSuchName`], [`DnsError::NoAddresses`]), never an empty list.
pub async fn resolve(
    host: &str,
    port: u16,
    nameserver: Option<SocketAddr>,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, DnsError> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if let Ok(ip) = literal.unwrap_or(host).parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let mut addrs: Vec<SocketAddr> = match nameserver {
        None => tokio::time::timeout(timeout, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| DnsError::Timeout(timeout))?
            .map_err(|e| DnsError::System(Arc::new(e)))?
            .collect(),
        Some(server) => {
            let a = Question::new(host, TYPE_A)?;
            let aaaa = Question::new(host, TYPE_AAAA)?;
            let (v4, v6) = tokio::try_join!(a.ask(server, timeout), aaaa.ask(server, timeout))?;
            v4.into_iter()
                .chain(v6)
                .map(|ip| SocketAddr::new(ip, port))
                .collect()
        }
    };
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(DnsError::NoAddresses);
    }
    Ok(addrs)
}

/// One query: its id, the name asked (lowercase, dotted, no final dot), its type, and the packet.
struct Question {
    id: u16,
    name: Vec<u8>,
    qtype: u16,
    packet: Vec<u8>,
}

/// What a reply is to the query that waits for it.
enum Reply {
    /// Not a reply to it (another id or question, or too short to tell): ignored.
    Other,
    /// Its reply, with TC set: asked again over TCP.
    Truncated,
    Answer(Result<Vec<IpAddr>, DnsError>),
}

impl Question {
    fn new(host: &str, qtype: u16) -> Result<Question, DnsError> {
        let invalid = || DnsError::InvalidName(host.to_owned());
        let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        // A random id (uuid's v4 bits are random in its first bytes); the source port is the
        // kernel's random ephemeral one.
        let random = uuid::Uuid::new_v4().into_bytes();
        let id = u16::from_be_bytes([random[0], random[1]]);
        // RD; one question, no answer or authority, one additional (the OPT record).
        let mut packet = [&id.to_be_bytes()[..], &[1, 0, 0, 1, 0, 0, 0, 0, 0, 1]].concat();
        for label in name.split('.') {
            let len = u8::try_from(label.len()).map_err(|_| invalid())?;
            if len == 0 || len > 63 || !label.is_ascii() {
                return Err(invalid());
            }
            packet.push(len);
            packet.extend_from_slice(label.as_bytes());
        }
        packet.push(0);
        if packet.len() - 12 > 255 {
            return Err(invalid());
        }
        packet.extend([qtype.to_be_bytes(), CLASS_IN.to_be_bytes()].as_flattened());
        packet.extend(OPT);
        Ok(Question {
            id,
            name: name.into_bytes(),
            qtype,
            packet,
        })
    }

    /// Over UDP from a socket connected to `server` (the kernel drops datagrams from anyone
    /// else), sent again once on timeout; over TCP when the reply is truncated.
    async fn ask(&self, server: SocketAddr, timeout: Duration) -> Result<Vec<IpAddr>, DnsError> {
        let any: IpAddr = match server {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let socket = UdpSocket::bind((any, 0)).await.map_err(io_error)?;
        socket.connect(server).await.map_err(io_error)?;
        let mut buf = vec![0u8; UDP_MAX];
        for _ in 0..2 {
            socket.send(&self.packet).await.map_err(io_error)?;
            let deadline = tokio::time::Instant::now() + timeout;
            while let Ok(received) = tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await
            {
                let n = received.map_err(io_error)?;
                match self.read(buf.get(..n).unwrap_or_default()) {
                    Reply::Other => continue,
                    Reply::Truncated => return self.ask_tcp(server, timeout).await,
                    Reply::Answer(answer) => return answer,
                }
            }
        }
        Err(DnsError::Timeout(timeout))
    }

    /// The query over TCP, each message after its 2-byte length (so at most 65535 bytes).
    async fn ask_tcp(
        &self,
        server: SocketAddr,
        timeout: Duration,
    ) -> Result<Vec<IpAddr>, DnsError> {
        let exchange = async {
            let mut stream = TcpStream::connect(server).await?;
            let len = u16::try_from(self.packet.len()).unwrap_or(u16::MAX);
            let framed = [&len.to_be_bytes()[..], &self.packet].concat();
            stream.write_all(&framed).await?;
            let mut reply = vec![0u8; usize::from(stream.read_u16().await?)];
            stream.read_exact(&mut reply).await?;
            Ok::<_, io::Error>(reply)
        };
        let reply = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| DnsError::Timeout(timeout))?
            .map_err(io_error)?;
        match self.read(&reply) {
            Reply::Answer(answer) => answer,
            Reply::Truncated => Err(DnsError::Malformed("truncated over TCP")),
            Reply::Other => Err(DnsError::Malformed("the TCP reply answers another query")),
        }
    }

    /// `reply` read against this query: ours only with our id, QR set, a standard query and
    /// our question; then its RCODE, then the records of our type in its answer section,
    /// whatever their owner (a CNAME chain's last name is not ours).
    fn read(&self, reply: &[u8]) -> Reply {
        let Some(header) = reply.get(..12) else {
            return Reply::Other;
        };
        let flags = be16(header, 2);
        if be16(header, 0) != self.id || flags & 0x8000 == 0 || flags & 0x7800 != 0 {
            return Reply::Other;
        }
        let mut pos = 12;
        let ours = be16(header, 4) == 1
            && read_name(reply, &mut pos).is_ok_and(|name| name == self.name)
            && reply
                .get(pos..pos + 4)
                .is_some_and(|t| be16(t, 0) == self.qtype && be16(t, 2) == CLASS_IN);
        if !ours {
            return Reply::Other;
        }
        if flags & 0x0200 != 0 {
            return Reply::Truncated;
        }
        Reply::Answer(match flags & 0xF {
            0 => self.records(reply, pos + 4, be16(header, 6)),
            3 => Err(DnsError::NoSuchName),
            code => Err(DnsError::Rcode(code as u8)),
        })
    }

    fn records(&self, msg: &[u8], mut pos: usize, count: u16) -> Result<Vec<IpAddr>, DnsError> {
        let short = DnsError::Malformed("a record runs past the end");
        let mut found = Vec::new();
        for _ in 0..count {
            read_name(msg, &mut pos)?;
            let fixed = msg.get(pos..pos + 10).ok_or(short.clone())?;
            let (rtype, class, len) = (be16(fixed, 0), be16(fixed, 2), be16(fixed, 8));
            let data = msg
                .get(pos + 10..pos + 10 + usize::from(len))
                .ok_or(short.clone())?;
            pos += 10 + usize::from(len);
            if class != CLASS_IN || rtype != self.qtype {
                continue;
            }
            found.push(
                match (rtype, <[u8; 4]>::try_from(data), <[u8; 16]>::try_from(data)) {
                    (TYPE_A, Ok(v4), _) => IpAddr::from(v4),
                    (TYPE_AAAA, _, Ok(v6)) => IpAddr::from(v6),
                    _ => return Err(DnsError::Malformed("an address record of the wrong length")),
                },
            );
        }
        Ok(found)
    }
}

fn be16(bytes: &[u8], at: usize) -> u16 {
    match bytes.get(at..at + 2) {
        Some(&[high, low]) => u16::from_be_bytes([high, low]),
        _ => 0,
    }
}

/// The name at `*pos` in `msg`, lowercase and dotted, `*pos` moved past it (past its first
/// pointer, if it has one).
fn read_name(msg: &[u8], pos: &mut usize) -> Result<Vec<u8>, DnsError> {
    let short = DnsError::Malformed("a name runs past the end");
    let mut name = Vec::new();
    let mut at = *pos;
    let mut hops = 0;
    loop {
        let len = usize::from(*msg.get(at).ok_or(short.clone())?);
        if len & 0xC0 == 0xC0 {
            let low = usize::from(*msg.get(at + 1).ok_or(short.clone())?);
            if hops == 0 {
                *pos = at + 2;
            }
            hops += 1;
            if hops > MAX_HOPS {
                return Err(DnsError::Malformed("compression pointers in a loop"));
            }
            at = (len & 0x3F) << 8 | low;
        } else if len & 0xC0 != 0 {
            return Err(DnsError::Malformed("a label of an unknown kind"));
        } else if len == 0 {
            if hops == 0 {
                *pos = at + 1;
            }
            return Ok(name);
        } else {
            let label = msg.get(at + 1..at + 1 + len).ok_or(short.clone())?;
            if !name.is_empty() {
                name.push(b'.');
            }
            name.extend(label.iter().map(u8::to_ascii_lowercase));
            if name.len() > 255 {
                return Err(DnsError::Malformed("a name longer than 255 bytes"));
            }
            at += 1 + len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: u16 = 0x8180;
    /// A pointer to the question's name.
    const QNAME: [u8; 2] = [0xC0, 12];

    /// A reply to the query `packet` with `flags`, its question, then `answers` (`count` records).
    fn reply(packet: &[u8], flags: u16, count: u16, answers: &[u8]) -> Vec<u8> {
        let mut r = packet[..packet.len() - OPT.len()].to_vec();
        r[2..4].copy_from_slice(&flags.to_be_bytes());
        r[6..8].copy_from_slice(&count.to_be_bytes());
        r[11] = 0;
        [&r, answers].concat()
    }

    fn rr(owner: &[u8], rtype: u16, data: &[u8]) -> Vec<u8> {
        let len = (data.len() as u16).to_be_bytes();
        let fixed = [rtype.to_be_bytes(), [0, 1], [0, 0], [0, 30], len];
        [owner, fixed.as_flattened(), data].concat()
    }

    fn answer(q: &Question, reply: &[u8]) -> Result<Vec<IpAddr>, DnsError> {
        match q.read(reply) {
            Reply::Answer(a) => a,
            _ => panic!("not taken for the answer"),
        }
    }

    #[test]
    fn cname_chains_compression_pointers_and_aaaa() {
        let q = Question::new("API.agents.test.", TYPE_A).unwrap();
        // The question's name is 17 bytes at 12: the CNAME's data starts at 12 + 17 + 4 + 12.
        let mut answers = rr(&QNAME, 5, &[3, b'x', b'y', b'z', 0xC0, 16]);
        answers.extend(rr(&[0xC0, 45], TYPE_A, &[10, 0, 0, 2]));
        answers.extend(rr(&[0xC0, 45], TYPE_A, &[10, 0, 0, 1]));
        answers.extend(rr(&QNAME, TYPE_AAAA, &[0; 16]));
        let r = reply(&q.packet, OK, 4, &answers);
        let want = [[10, 0, 0, 2], [10, 0, 0, 1]].map(IpAddr::from);
        assert_eq!(answer(&q, &r).unwrap(), want);
        let mut pos = 45;
        assert_eq!(read_name(&r, &mut pos).unwrap(), b"xyz.agents.test");
        assert_eq!(pos, 51);

        let q = Question::new("agents.test", TYPE_AAAA).unwrap();
        let v6 = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 7);
        let r = reply(&q.packet, OK, 1, &rr(&QNAME, TYPE_AAAA, &v6.octets()));
        assert_eq!(answer(&q, &r).unwrap(), [IpAddr::from(v6)]);
        let r = reply(&q.packet, OK, 1, &rr(&QNAME, TYPE_AAAA, &[1, 2, 3, 4]));
        assert!(matches!(answer(&q, &r), Err(DnsError::Malformed(_))));
    }

    #[test]
    fn pointer_loops_are_errors() {
        let q = Question::new("agents.test", TYPE_A).unwrap();
        // Owners that point at themselves (the answer is at 12 + 13 + 4), or at each other.
        for owner in [&[0xC0, 29][..], &[0xC0, 31, 0xC0, 29]] {
            let r = reply(&q.packet, OK, 1, &rr(owner, TYPE_A, &[1, 1, 1, 1]));
            assert!(matches!(answer(&q, &r), Err(DnsError::Malformed(m)) if m.contains("loop")));
        }
        // A question that is a loop cannot be ours.
        let mut r = reply(&q.packet, OK, 0, &[]);
        r.splice(12..25, QNAME);
        assert!(matches!(q.read(&r), Reply::Other));
    }

    #[test]
    fn cut_or_corrupt_replies_never_panic_nor_pass() {
        let q = Question::new("agents.test", TYPE_A).unwrap();
        let mut answers = rr(&QNAME, TYPE_A, &[10, 0, 0, 1]);
        answers.extend(rr(&QNAME, TYPE_A, &[10, 0, 0, 2]));
        let full = reply(&q.packet, OK, 2, &answers);
        assert_eq!(answer(&q, &full).unwrap().len(), 2);
        for n in 0..full.len() {
            let cut = q.read(&full[..n]);
            assert!(!matches!(cut, Reply::Answer(Ok(_))), "cut at {n}");
        }
        for i in 0..full.len() {
            for b in [0x00, 0x01, 0x3F, 0x40, 0xC0, 0xFF] {
                let mut bad = full.clone();
                bad[i] = b;
                let _ = q.read(&bad);
            }
        }
    }

    #[test]
    fn other_queries_replies_are_ignored_and_rcodes_are_errors() {
        let q = Question::new("agents.test", TYPE_A).unwrap();
        let with = |flags| reply(&q.packet, flags, 0, &[]);
        let mut wrong_id = with(OK);
        wrong_id[0] ^= 0xFF;
        let aaaa = Question::new("agents.test", TYPE_AAAA).unwrap();
        for r in [wrong_id, with(0x0100), reply(&aaaa.packet, OK, 0, &[])] {
            assert!(matches!(q.read(&r), Reply::Other));
        }
        assert!(answer(&q, &with(OK)).unwrap().is_empty());
        assert!(matches!(
            answer(&q, &with(0x8183)),
            Err(DnsError::NoSuchName)
        ));
        let servfail = answer(&q, &with(0x8182)).unwrap_err().to_string();
        assert_eq!(servfail, "the nameserver answered SERVFAIL (RCODE 2)");
        assert!(matches!(q.read(&with(0x8380)), Reply::Truncated));
    }

    #[tokio::test]
    async fn literals_and_invalid_names() {
        let t = Duration::from_secs(1);
        let got = resolve("[fd00::1]", 80, None, t).await.unwrap();
        assert_eq!(got, ["[fd00::1]:80".parse().unwrap()]);
        let ns = Some("127.0.0.1:9".parse().unwrap());
        let got = resolve("10.1.2.3", 80, ns, t).await.unwrap();
        assert_eq!(got, ["10.1.2.3:80".parse().unwrap()]);
        for bad in ["a..test", "x".repeat(64).as_str(), "é.test", "."] {
            let got = resolve(bad, 80, ns, t).await;
            assert!(matches!(got, Err(DnsError::InvalidName(_))), "{bad}");
        }
    }

    /// A nameserver on loopback: a reply with another id first (ignored), then A records
    /// (one twice) over UDP, and AAAA truncated over UDP and whole over TCP on the same port.
    #[tokio::test]
    async fn over_udp_and_tcp_to_a_nameserver() {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let server = udp.local_addr().unwrap();
        let tcp = tokio::net::TcpListener::bind(server).await.unwrap();
        let v6 = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 9);
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            loop {
                let (n, from) = udp.recv_from(&mut buf).await.unwrap();
                let query = &buf[..n];
                let mut replies = vec![reply(query, 0x8380, 0, &[])];
                if be16(query, n - OPT.len() - 4) == TYPE_A {
                    let mut spoof = reply(query, OK, 1, &rr(&QNAME, TYPE_A, &[6, 6, 6, 6]));
                    spoof[1] ^= 1;
                    let mut answers = rr(&QNAME, TYPE_A, &[10, 0, 0, 2]);
                    answers.extend(rr(&QNAME, TYPE_A, &[10, 0, 0, 1]));
                    answers.extend(rr(&QNAME, TYPE_A, &[10, 0, 0, 2]));
                    replies = vec![spoof, reply(query, OK, 3, &answers)];
                }
                for r in replies {
                    udp.send_to(&r, from).await.unwrap();
                }
            }
        });
        tokio::spawn(async move {
            let (mut s, _) = tcp.accept().await.unwrap();
            let mut query = vec![0u8; usize::from(s.read_u16().await.unwrap())];
            s.read_exact(&mut query).await.unwrap();
            let r = reply(&query, OK, 1, &rr(&QNAME, TYPE_AAAA, &v6.octets()));
            s.write_all(&[&(r.len() as u16).to_be_bytes()[..], &r].concat())
                .await
                .unwrap();
        });
        let got = resolve("agents.test", 9000, Some(server), Duration::from_secs(2)).await;
        let want = ["10.0.0.1:9000", "10.0.0.2:9000", "[fd00::9]:9000"].map(|a| a.parse().unwrap());
        assert_eq!(got.unwrap(), want);
    }

    /// A nameserver that never answers: each query sent twice, then a timeout.
    #[tokio::test]
    async fn a_silent_nameserver_times_out_after_one_retry() {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let server = udp.local_addr().unwrap();
        let got = resolve("agents.test", 80, Some(server), Duration::from_millis(100)).await;
        assert!(matches!(got, Err(DnsError::Timeout(_))), "{got:?}");
        let mut buf = [0u8; 512];
        let mut queries = 0;
        while udp.try_recv_from(&mut buf).is_ok() {
            queries += 1;
        }
        assert_eq!(queries, 4, "A and AAAA, each twice");
    }
}
