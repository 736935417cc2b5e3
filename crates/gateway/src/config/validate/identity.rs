//! The identity checks: `admin_token` beside clients, a public `listen` without them,
//! `[[clients]]`, `[auth.jwt]` and `[cors]`.

use super::*;

impl Validator {
    /// Everything about who may call the gateway.
    pub(super) fn identity(&mut self, c: &Config, rules: &dyn Rules) {
        if let Some(tok) = &c.admin_token {
            if c.auth_enabled() {
                self.problem(
                    "admin_token",
                    "is not used when [[clients]] or [auth.jwt] are configured; give a client the `admin` right instead (can = [\"admin\"])",
                );
            } else if tok.expose().len() < 16 {
                self.problem("admin_token", "must be at least 16 characters");
            }
        }
        if !c.auth_enabled() && !c.allow_anonymous && !c.listen.ip().is_loopback() {
            self.problem(
                "listen",
                format!(
                    "{} is not a loopback address and no [[clients]] or [auth.jwt] are configured: anyone who reaches it could use every agent; configure clients, or set allow_anonymous = true",
                    c.listen
                ),
            );
        }
        let mut names = HashSet::new();
        let mut keys = HashMap::new();
        let mut subjects = HashMap::new();
        let mut jwt_subjects = HashMap::new();
        for (i, cl) in c.clients.iter().enumerate() {
            let at = format!("clients[{i}]");
            self.client(cl, &at, c);
            if !cl.name.is_empty() && !names.insert(cl.name.as_str()) {
                self.problem(
                    format!("{at}.name"),
                    format!("{:?} is used by another client", cl.name),
                );
            }
            if let Some(k) = cl.key_sha256.as_deref().filter(|k| is_sha256_hex(k)) {
                if let Some(first) = keys.insert(k.to_ascii_lowercase(), i) {
                    self.problem(
                        format!("{at}.key_sha256"),
                        format!(
                            "is the same key as clients[{first}]: one key must name one client"
                        ),
                    );
                }
            }
            if let Some(s) = cl.cert_subject.as_deref().filter(|s| !s.is_empty()) {
                if let Some(first) = subjects.insert(s, i) {
                    self.problem(
                        format!("{at}.cert_subject"),
                        format!(
                            "is the same subject as clients[{first}]: one certificate subject must name one client"
                        ),
                    );
                }
            }
            if let Some(s) = cl.jwt_subject.as_deref().filter(|s| !s.is_empty()) {
                if let Some(first) = jwt_subjects.insert((cl.jwt_issuer.as_deref(), s), i) {
                    self.problem(
                        format!("{at}.jwt_subject"),
                        format!(
                            "is the same subject as clients[{first}]: one token subject must name one client"
                        ),
                    );
                }
            }
        }
        self.range(
            "auth.token_max_contexts",
            c.auth.token_max_contexts,
            1 << 32,
        );
        self.token_rate(&c.auth);
        if let Some(jwt) = &c.auth.jwt {
            self.jwt(jwt, rules);
        }
        let mut issuers = HashSet::new();
        for (i, o) in c.auth.oidc.iter().enumerate() {
            let at = format!("auth.oidc[{i}]");
            self.oidc(o, &at, c, rules);
            if !o.name.is_empty() && !issuers.insert(o.name.as_str()) {
                self.problem(
                    format!("{at}.name"),
                    format!("{:?} is used by another [[auth.oidc]] entry", o.name),
                );
            }
            // A token goes to the issuer its `iss` names: one `iss`, one place to check it.
            let same_iss =
                |other: &str| other.trim_end_matches('/') == o.issuer.trim_end_matches('/');
            let earlier = c.auth.oidc[..i].iter().any(|p| same_iss(&p.issuer));
            let jwt = c.auth.jwt.as_ref().is_some_and(|j| same_iss(&j.issuer));
            if !o.issuer.is_empty() && (earlier || jwt) {
                self.problem(
                    format!("{at}.issuer"),
                    format!(
                        "{:?} is the issuer of {} too: a token's `iss` must name one place its keys come from",
                        o.issuer,
                        if earlier { "another [[auth.oidc]] entry" } else { "[auth.jwt]" }
                    ),
                );
            }
        }
        if let Some(cors) = &c.cors {
            for (i, o) in cors.allow_origins.iter().enumerate() {
                if let Err(e) = check_origin(o) {
                    self.problem(format!("cors.allow_origins[{i}]"), e);
                }
            }
            self.secs("cors.max_age_secs", cors.max_age, 86_400);
        }
    }

    fn client(&mut self, cl: &ClientConfig, at: &str, c: &Config) {
        if cl.name.is_empty() {
            self.problem(format!("{at}.name"), "is required");
        } else if !valid_name(&cl.name) || cl.name == "anonymous" || cl.name == "jwt" {
            self.problem(
                format!("{at}.name"),
                format!(
                    "{:?} must be 1-64 characters of A-Z a-z 0-9 . _ -, and not \"anonymous\" or \"jwt\" (metrics labels of their own)",
                    cl.name
                ),
            );
        }
        match cl.key_sha256.as_deref() {
            Some(k) if !is_sha256_hex(k) => self.problem(
                format!("{at}.key_sha256"),
                "must be 64 hex digits: the SHA-256 of the key (e.g. `printf %s \"$KEY\" | sha256sum`)",
            ),
            None if cl.jwt_subject.is_none() && cl.cert_subject.is_none() => self.problem(
                format!("{at}.key_sha256"),
                "is required unless the client has a jwt_subject or a cert_subject (the client could never authenticate)",
            ),
            _ => {}
        }
        if let Some(issuer) = &cl.jwt_issuer {
            if cl.jwt_subject.is_none() {
                self.problem(
                    format!("{at}.jwt_issuer"),
                    "has no effect without jwt_subject (it names the issuer a jwt_subject is for)",
                );
            } else if !c.auth.oidc.iter().any(|o| o.name == *issuer) {
                self.problem(
                    format!("{at}.jwt_issuer"),
                    format!("{issuer:?} is not the name of an [[auth.oidc]] entry"),
                );
            }
        }
        if let Some(sub) = &cl.jwt_subject {
            if cl.jwt_issuer.is_none() && c.auth.jwt.is_none() {
                self.problem(
                    format!("{at}.jwt_subject"),
                    "needs [auth.jwt], or jwt_issuer naming an [[auth.oidc]] entry: without one no token is verified, so none could name this client",
                );
            } else if sub.is_empty() || sub.len() > 256 || sub.chars().any(char::is_control) {
                self.problem(
                    format!("{at}.jwt_subject"),
                    "must be 1-256 characters without control characters (a token's `sub`)",
                );
            }
        }
        if let Some(subject) = &cl.cert_subject {
            let verified = c.tls.as_ref().is_some_and(|t| t.client_ca_file.is_some());
            if let Err(e) = check_subject(subject) {
                self.problem(format!("{at}.cert_subject"), e);
            } else if !verified {
                self.problem(
                    format!("{at}.cert_subject"),
                    "needs [tls] client_ca_file: without it no client certificate is asked for, so none could name this client",
                );
            }
        }
        if cl.agents.is_empty() {
            self.problem(
                format!("{at}.agents"),
                "must list at least one agent, or \"*\" for all",
            );
        }
        for a in &cl.agents {
            let known = a == "*" || uuid_shaped(a) || c.agents.iter().any(|x| x.name == *a);
            if !known {
                self.problem(
                    format!("{at}.agents"),
                    format!("{a:?} is not the name of an [[agents]] entry, an agent_id, or \"*\""),
                );
            }
        }
        self.range(&format!("{at}.max_streams"), cl.max_streams as u64, 1 << 20);
        if let Some(n) = cl.max_live_tasks {
            self.range(&format!("{at}.max_live_tasks"), n, 1 << 32);
        }
        self.range(&format!("{at}.max_contexts"), cl.max_contexts, 1 << 32);
        if let Some(n) = cl.max_ledger_bytes {
            self.range(&format!("{at}.max_ledger_bytes"), n as u64, 1 << 50);
        }
        match cl.rate_per_sec {
            Some(r) if !(MIN_RATE..=MAX_RATE).contains(&r) => self.problem(
                format!("{at}.rate_per_sec"),
                format!("must be a number between {MIN_RATE} and {MAX_RATE}"),
            ),
            None if cl.burst.is_some() => self.problem(
                format!("{at}.burst"),
                "has no effect without rate_per_sec (the client is not rate-limited)",
            ),
            _ => {}
        }
        if let Some(b) = cl.burst {
            self.range(&format!("{at}.burst"), b, MAX_BURST);
        }
    }

    /// `[auth]`'s bucket of each token subject, and the table of them. No switch turns it off:
    /// a subject the operator never named has a rate all the same.
    fn token_rate(&mut self, a: &AuthConfig) {
        if !(MIN_RATE..=MAX_RATE).contains(&a.token_rate_per_sec) {
            self.problem(
                "auth.token_rate_per_sec",
                format!("must be a number between {MIN_RATE} and {MAX_RATE}"),
            );
        }
        if let Some(b) = a.token_burst {
            self.range("auth.token_burst", b, MAX_BURST);
        }
        self.range(
            "auth.max_token_subjects",
            a.max_token_subjects as u64,
            MAX_TOKEN_SUBJECTS,
        );
    }

    fn jwt(&mut self, j: &JwtConfig, rules: &dyn Rules) {
        if j.jwks_file.is_empty() {
            self.problem("auth.jwt.jwks_file", "is required in [auth.jwt]");
        } else if let Err(e) = rules.check(Check::JwksFile(Path::new(&j.jwks_file))) {
            self.problem("auth.jwt.jwks_file", e);
        }
        if j.issuer.is_empty() {
            self.problem("auth.jwt.issuer", "is required in [auth.jwt]");
        }
        if j.audience.is_empty() {
            self.problem("auth.jwt.audience", "is required in [auth.jwt]");
        }
        if j.leeway > Duration::from_secs(300) {
            self.problem("auth.jwt.leeway_secs", "must be between 0 and 300");
        }
    }
}

impl Validator {
    fn oidc(&mut self, o: &OidcConfig, at: &str, c: &Config, rules: &dyn Rules) {
        if o.name.is_empty() {
            self.problem(format!("{at}.name"), "is required in [[auth.oidc]]");
        } else if !valid_name(&o.name) {
            self.problem(
                format!("{at}.name"),
                format!(
                    "{:?} must be 1-64 characters of A-Z a-z 0-9 . _ - (a metrics label)",
                    o.name
                ),
            );
        }
        if o.issuer.is_empty() {
            self.problem(format!("{at}.issuer"), "is required in [[auth.oidc]]");
        } else if let Err(e) = check_issuer(&o.issuer) {
            self.problem(format!("{at}.issuer"), e);
        }
        if o.audience.is_empty() {
            self.problem(format!("{at}.audience"), "is required in [[auth.oidc]]");
        }
        if o.leeway > Duration::from_secs(300) {
            self.problem(format!("{at}.leeway_secs"), "must be between 0 and 300");
        }
        if o.algorithms.is_empty() {
            self.problem(
                format!("{at}.algorithms"),
                "must name at least one of RS256, ES256, EdDSA",
            );
        }
        for a in &o.algorithms {
            if !OIDC_ALGORITHMS.contains(&a.as_str()) {
                self.problem(
                    format!("{at}.algorithms"),
                    format!("{a:?} is not accepted; only RS256, ES256 and EdDSA are"),
                );
            }
        }
        if let Some(ca) = &o.ca_file {
            if let Err(e) = rules.check(Check::PemFile(PemKind::TrustAnchors, Path::new(ca))) {
                self.problem(format!("{at}.ca_file"), e);
            }
        }
        if o.jwks_refresh < Duration::from_secs(1) || o.jwks_refresh > Duration::from_secs(86_400) {
            self.problem(
                format!("{at}.jwks_refresh_secs"),
                "must be between 1 and 86400",
            );
        }
        // Unknown rights and methods were refused as the table was read, naming the scope.
        for (scope, r) in &o.scopes {
            if !scope_token(scope) {
                self.problem(
                    format!("{at}.scopes"),
                    format!(
                        "{scope:?} is not a scope a token can carry: 1-{MAX_SCOPE_LEN} characters of printable ASCII without spaces, '\"' or '\\' (RFC 6749's scope-token)"
                    ),
                );
            }
            for a in &r.agents {
                let known = a == "*" || uuid_shaped(a) || c.agents.iter().any(|x| x.name == *a);
                if !known {
                    self.problem(
                        format!("{at}.scopes"),
                        format!("{scope:?}: agents: {a:?} is not the name of an [[agents]] entry, an agent_id, or \"*\""),
                    );
                }
            }
        }
    }
}

/// A scope as RFC 6749 (3.3) writes one, `1*( %x21 / %x23-5B / %x5D-7E )`, and no longer than
/// the gateway reads from a token.
fn scope_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SCOPE_LEN
        && s.bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

/// An issuer URL the gateway may fetch from: `https`, or `http` to a loopback address only
/// (a token's keys over plaintext could be swapped by anyone on the path); no query or
/// fragment (the discovery path is appended to it).
fn check_issuer(issuer: &str) -> Result<(), String> {
    let url = url::Url::parse(issuer)
        .map_err(|e| format!("{issuer:?} is not a URL ({e}); it must be https://..."))?;
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(format!(
            "{issuer:?} must have no query, fragment or user: the discovery path is appended to it"
        ));
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(format!(
            "{issuer:?} is plain http to a host that is not a loopback address: the keys that verify tokens must come over https"
        )),
        _ => Err(format!("{issuer:?} must be an https:// URL")),
    }
}

/// A `cert_subject` that could ever equal a subject the gateway renders (RFC 4514: `type=value`
/// pairs joined by `,` or `+`, no space after a separator, no OpenSSL `/CN=...` form).
fn check_subject(s: &str) -> Result<(), String> {
    let hint = "must be a distinguished name in RFC 4514 form, last RDN first, such as \"CN=orchestrator-a,O=Example\"";
    if s.trim().is_empty() || !s.contains('=') {
        return Err(hint.into());
    }
    if s.starts_with('/') {
        return Err(format!("{s:?} is in OpenSSL's /-separated form; it {hint}"));
    }
    if s != s.trim() {
        return Err(format!("{s:?} has spaces around it; it {hint}"));
    }
    // A `,` or `+` not escaped by a backslash, followed by a space: RFC 4514 puts none there,
    // so the rendered subject would never be equal.
    let b = s.as_bytes();
    let mut escaped = false;
    for (i, &c) in b.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            b'\\' => escaped = true,
            b',' | b'+' if b.get(i + 1) == Some(&b' ') => {
                return Err(format!(
                    "{s:?} has a space after a separator, which RFC 4514 form never has (\"CN=a,O=b\", not \"CN=a, O=b\"); it {hint}"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// `[auth] max_token_subjects` at most: ten million buckets are about a gigabyte.
const MAX_TOKEN_SUBJECTS: u64 = 10_000_000;

fn is_sha256_hex(k: &str) -> bool {
    k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit())
}

/// An exact browser origin: `scheme://host[:port]`, http or https, nothing after it.
fn check_origin(o: &str) -> Result<(), String> {
    let (scheme, rest) = o.split_once("://").ok_or_else(|| {
        format!("{o:?} must be an origin such as \"https://console.example.com\"")
    })?;
    if scheme != "http" && scheme != "https" {
        return Err(format!("{o:?} must be an http:// or https:// origin"));
    }
    let host =
        rest.rsplit_once(':').map_or(
            rest,
            |(h, port)| {
                if port.parse::<u16>().is_ok() {
                    h
                } else {
                    rest
                }
            },
        );
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.[]:".contains(&b));
    if !host_ok {
        return Err(format!(
            "{o:?} must be an exact origin in lower case: scheme://host[:port], with no path, wildcard or trailing slash"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::testing::*;
    use crate::config::*;

    #[test]
    fn identity_problems_are_reported_with_their_keys() {
        let p = Config::parse(&format!(
            r#"
            listen = "127.0.0.1:1"
            admin_token = "0123456789abcdef0123"
            [[clients]]
            name = "a b"
            key_sha256 = "abc"
            agents = ["nobody"]
            [[clients]]
            name = "anonymous"
            key_sha256 = "{HASH}"
            [[clients]]
            name = "c"
            [[clients]]
            name = "d"
            key_sha256 = "{HASH2}"
            can = ["tasks", "root", "streams", "everything"]
            [[clients]]
            name = "d"
            key_sha256 = "{HASH2}"
            [cors]
            allow_origins = ["https://console.example.com/", "*"]
            [[agents]]
            name = "scripts"
            url = "http://x"
        "#
        ))
        .expect_err("broken");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "admin_token",
                "clients[0].name",
                "clients[0].key_sha256",
                "clients[0].agents",
                "clients[1].name",
                "clients[2].key_sha256",
                "clients[3].can",
                "clients[4].name",
                "clients[4].key_sha256",
                "cors.allow_origins[0]",
                "cors.allow_origins[1]",
            ],
            "{p:#?}"
        );
        assert!(p[0].message.contains("`admin` right"), "{}", p[0].message);
        // Every unknown right is named at once, with what a right may be.
        let can = &p[6].message;
        assert!(
            can.contains("unknown rights \"root\", \"everything\"") && can.contains("all_tasks"),
            "{can}"
        );
    }

    #[test]
    fn methods_are_the_protos_names_every_unknown_one_named_at_once() {
        let clients = |methods: &str| {
            format!(
                "listen = \"127.0.0.1:1\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n[[clients]]\nname = \"r\"\nkey_sha256 = \"{HASH}\"\n{methods}[[clients]]\nname = \"w\"\nkey_sha256 = \"{HASH2}\"\n"
            )
        };
        let p = Config::parse(&clients(
            "methods = [\"GetTask\", \"message/send\", \"ListTasks\", \"getTask\"]\n",
        ))
        .expect_err("unknown methods");
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_eq!(p[0].key, "clients[0].methods");
        let m = &p[0].message;
        assert!(
            m.contains("unknown A2A methods \"message/send\", \"getTask\":"),
            "{m}"
        );
        // With the names there are: every method of the proto.
        for name in A2A_METHODS_OF_TEST {
            assert!(m.contains(name), "{name}: {m}");
        }
        let cfg =
            Config::parse(&clients("methods = [\"GetTask\", \"ListTasks\"]\n")).expect("valid");
        assert_eq!(cfg.clients[0].methods, ["GetTask", "ListTasks"]);
        assert_eq!(cfg.clients[1].methods.len(), 11, "absent: every method");
        let none = Config::parse(&clients("methods = []\n")).expect("no method is a choice");
        assert!(none.clients[0].methods.is_empty());
    }

    /// The 1.0 proto's eleven methods, as an operator reads them in the docs.
    const A2A_METHODS_OF_TEST: [&str; 11] = [
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "GetExtendedAgentCard",
    ];

    #[test]
    fn a_public_listen_address_needs_clients_or_allow_anonymous() {
        let agents = "[[agents]]\nname = \"a\"\nurl = \"http://x\"\n";
        let p = Config::parse(&format!("listen = \"0.0.0.0:8080\"\n{agents}")).expect_err("open");
        assert_eq!(p[0].key, "listen");
        assert!(p[0].message.contains("allow_anonymous"), "{}", p[0].message);
        Config::parse(&format!(
            "listen = \"0.0.0.0:8080\"\nallow_anonymous = true\n{agents}"
        ))
        .expect("explicitly open");
        Config::parse(&format!("listen = \"[::1]:8080\"\n{agents}")).expect("loopback");
        Config::parse(&format!(
            "listen = \"0.0.0.0:8080\"\n[[clients]]\nname = \"c\"\nkey_sha256 = \"{HASH}\"\n{agents}"
        ))
        .expect("with clients");
    }

    #[test]
    fn jwt_needs_its_keys_issuer_and_audience() {
        let p = Config::parse(
            "listen = \"127.0.0.1:1\"\n[auth.jwt]\nleeway_secs = 900\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n",
        )
        .expect_err("incomplete");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "auth.jwt.jwks_file",
                "auth.jwt.issuer",
                "auth.jwt.audience",
                "auth.jwt.leeway_secs"
            ]
        );
    }

    #[test]
    fn token_subjects_rates_are_checked_each_with_its_key() {
        let auth = |keys: &str| {
            Config::parse(&format!(
                "listen = \"127.0.0.1:1\"\n[auth]\n{keys}[[agents]]\nname = \"a\"\nurl = \"http://x\"\n"
            ))
        };
        let p = auth("token_rate_per_sec = 0.0\ntoken_burst = 0\nmax_token_subjects = 0\n")
            .expect_err("out of range");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "auth.token_rate_per_sec",
                "auth.token_burst",
                "auth.max_token_subjects"
            ],
            "{p:#?}"
        );
        for bad in ["nan", "inf", "-1.0", "1000001.0"] {
            let p = auth(&format!("token_rate_per_sec = {bad}\n")).expect_err(bad);
            assert_eq!(p[0].key, "auth.token_rate_per_sec", "{bad}: {p:#?}");
        }
        let p = auth("max_token_subjects = 10000001\n").expect_err("too many");
        assert!(p[0].message.contains("10000000"), "{}", p[0].message);
        let cfg = auth("").expect("the defaults");
        assert_eq!(
            (
                cfg.auth.token_rate_per_sec,
                cfg.auth.token_burst,
                cfg.auth.max_token_subjects
            ),
            (20.0, None, 100_000)
        );
        let cfg =
            auth("token_rate_per_sec = 0.5\ntoken_burst = 3\nmax_token_subjects = 10000000\n")
                .expect("in range");
        assert_eq!(cfg.auth.token_burst, Some(3));
    }

    #[test]
    fn oidc_scopes_parse_into_rights_and_are_checked_each_with_its_key() {
        let cfg = |scopes: &str, clients: &str| {
            Config::parse(&format!(
                "listen = \"127.0.0.1:1\"\n[[agents]]\nname = \"echo\"\nurl = \"http://x\"\n\
                 [[auth.oidc]]\nname = \"corp\"\nissuer = \"https://idp.example.com\"\naudience = \"gw\"\n{scopes}\n{clients}"
            ))
        };
        let ok = cfg(
            r#"scopes = { "a2a.read" = { can = ["tasks"], methods = ["GetTask", "ListTasks"] }, "a2a.send" = { can = ["tasks", "streams"], agents = ["echo"] }, "https://api.example.com/a2a" = {} }"#,
            "",
        )
        .expect("valid");
        let s = &ok.auth.oidc[0].scopes;
        assert_eq!(
            s.keys().collect::<Vec<_>>(),
            ["a2a.read", "a2a.send", "https://api.example.com/a2a"]
        );
        let read = &s["a2a.read"];
        assert_eq!(
            (
                read.can.as_slice(),
                read.methods.as_slice(),
                read.agents.as_slice()
            ),
            (
                &[Right::Tasks][..],
                &["GetTask".to_owned(), "ListTasks".to_owned()][..],
                &["*".to_owned()][..]
            )
        );
        assert_eq!(s["a2a.send"].can, [Right::Tasks, Right::Streams]);
        assert_eq!(s["a2a.send"].agents, ["echo"]);
        assert_eq!(s["a2a.send"].methods.len(), 11, "absent: every method");
        let bare = &s["https://api.example.com/a2a"];
        assert!(bare.can.is_empty(), "absent: no right");
        assert!(ok.warnings().is_empty(), "{:?}", ok.warnings());
        // The table form parses the same.
        let table = cfg(
            "[auth.oidc.scopes.\"a2a.read\"]\ncan = [\"tasks\"]\nmethods = [\"GetTask\"]\n",
            "",
        )
        .expect("valid");
        assert_eq!(table.auth.oidc[0].scopes["a2a.read"].methods, ["GetTask"]);

        // An unknown method, right or key in a scope: refused at the table's key, naming the
        // scope and the value.
        for (scopes, names) in [
            (
                r#"scopes = { "a2a.read" = { methods = ["GetTask", "tasks/get"] } }"#,
                ["\"a2a.read\"", "unknown A2A method \"tasks/get\""],
            ),
            (
                r#"scopes = { "a2a.read" = { can = ["root"] } }"#,
                ["\"a2a.read\"", "unknown right \"root\""],
            ),
            (
                r#"scopes = { "a2a.read" = { cann = ["tasks"] } }"#,
                ["\"a2a.read\"", "cann"],
            ),
        ] {
            let p = cfg(scopes, "").expect_err(scopes);
            assert_eq!(p.len(), 1, "{p:#?}");
            assert_eq!(p[0].key, "auth.oidc[0].scopes", "{p:#?}");
            for n in names {
                assert!(p[0].message.contains(n), "{n}: {}", p[0].message);
            }
        }
        // Scope names a token could carry, agents the config has.
        let long = "s".repeat(MAX_SCOPE_LEN + 1);
        for bad in [
            "",
            "two words",
            "quo\\\"te",
            "back\\\\slash",
            "tab\\t",
            "é",
            long.as_str(),
        ] {
            let p = cfg(&format!("scopes = {{ \"{bad}\" = {{}} }}"), "").expect_err(bad);
            assert_eq!(p.len(), 1, "{bad}: {p:#?}");
            assert_eq!(p[0].key, "auth.oidc[0].scopes", "{bad}");
            assert!(p[0].message.contains("RFC 6749"), "{}", p[0].message);
        }
        let p = cfg(r#"scopes = { "a2a" = { agents = ["echo", "nope"] } }"#, "")
            .expect_err("unknown agent");
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_eq!(p[0].key, "auth.oidc[0].scopes");
        assert!(p[0].message.contains("\"nope\""), "{}", p[0].message);

        // No scope and no bound client: valid, but its tokens can do nothing: said.
        let none = cfg("", "").expect("valid");
        let w = none.warnings();
        assert!(
            w.len() == 1 && w[0].starts_with("auth.oidc[0].scopes") && w[0].contains("\"corp\""),
            "{w:?}"
        );
        let bound = cfg(
            "",
            "[[clients]]\nname = \"svc\"\njwt_subject = \"svc\"\njwt_issuer = \"corp\"\n",
        )
        .expect("valid");
        assert!(bound.warnings().is_empty(), "{:?}", bound.warnings());
    }

    #[test]
    fn oidc_issuers_are_checked_each_with_its_key() {
        let cfg = |oidc: &str, clients: &str| {
            Config::parse(&format!(
                "listen = \"127.0.0.1:1\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n{oidc}{clients}"
            ))
        };
        let entry = |name: &str, issuer: &str| {
            format!("[[auth.oidc]]\nname = \"{name}\"\nissuer = \"{issuer}\"\naudience = \"gw\"\n")
        };
        let ok = cfg(
            &(entry("corp", "https://idp.example.com/") + &entry("dev", "http://127.0.0.1:8080")),
            "[[clients]]\nname = \"c1\"\njwt_subject = \"svc\"\njwt_issuer = \"corp\"\n[[clients]]\nname = \"c2\"\njwt_subject = \"svc\"\njwt_issuer = \"dev\"\n",
        )
        .expect("one sub at two issuers is two clients");
        assert!(ok.auth_enabled());
        let o = &ok.auth.oidc[0];
        assert_eq!(o.algorithms, ["RS256", "ES256", "EdDSA"]);
        assert_eq!(o.jwks_refresh, Duration::from_secs(300));
        assert_eq!(
            o.discovery_url(),
            "https://idp.example.com/.well-known/openid-configuration"
        );
        let keys = |p: Vec<crate::config::Problem>| -> Vec<String> {
            p.into_iter().map(|p| p.key).collect()
        };
        let p = cfg(
            "[[auth.oidc]]\nalgorithms = [\"HS256\"]\njwks_refresh_secs = 0\nleeway_secs = 301\n",
            "",
        )
        .expect_err("empty");
        assert_eq!(
            keys(p),
            [
                "auth.oidc[0].name",
                "auth.oidc[0].issuer",
                "auth.oidc[0].audience",
                "auth.oidc[0].leeway_secs",
                "auth.oidc[0].algorithms",
                "auth.oidc[0].jwks_refresh_secs"
            ]
        );
        for bad in [
            "http://idp.example.com",
            "http://10.0.0.1:8080",
            "ftp://idp.example.com",
            "https://idp.example.com/?x=1",
            "not a url",
        ] {
            let p = cfg(&entry("corp", bad), "").expect_err(bad);
            assert_eq!(keys(p), ["auth.oidc[0].issuer"], "{bad}");
        }
        let p = cfg(
            &(entry("corp", "https://a.example.com") + &entry("dup", "https://a.example.com/")),
            "",
        )
        .expect_err("one iss, two issuers");
        assert_eq!(keys(p), ["auth.oidc[1].issuer"]);
        let p = cfg(
            &(entry("corp", "https://a.example.com/")
                + "[auth.jwt]\njwks_file = \"/dev/null\"\nissuer = \"https://a.example.com\"\naudience = \"gw\"\n"),
            "",
        )
        .expect_err("[auth.jwt]'s iss too");
        assert!(keys(p).contains(&"auth.oidc[0].issuer".to_owned()));
        let p = cfg(
            &(entry("corp", "https://a.example.com") + &entry("corp", "https://b.example.com")),
            "[[clients]]\nname = \"c\"\njwt_subject = \"s\"\njwt_issuer = \"nope\"\n[[clients]]\nname = \"d\"\njwt_subject = \"s\"\njwt_issuer = \"corp\"\n[[clients]]\nname = \"e\"\njwt_subject = \"s\"\njwt_issuer = \"corp\"\n",
        )
        .expect_err("duplicates");
        assert_eq!(
            keys(p),
            [
                "clients[0].jwt_issuer",
                "clients[2].jwt_subject",
                "auth.oidc[1].name"
            ]
        );
    }
}
