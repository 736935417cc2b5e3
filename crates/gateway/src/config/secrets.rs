//! Secrets from files: every key that holds a secret has a `*_file` form, read at each load (so
//! a reload picks up a rotated file), its problems reported at the `_file` key.

use super::*;

impl Config {
    /// Every `*_file` path that names a secret.
    pub(super) fn secret_files_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let top = self.admin_token_file.iter_mut();
        let redis = self.redis.iter_mut().flat_map(|r| r.url_file.iter_mut());
        let agents = self.agents.iter_mut().flat_map(|a| {
            a.ingest_token_file
                .iter_mut()
                .chain(a.upstream_auth_header_file.iter_mut())
        });
        let subs = self.subscribers.iter_mut().flat_map(|s| {
            s.secret_file
                .iter_mut()
                .chain(s.auth_header_file.iter_mut())
        });
        top.chain(redis).chain(agents).chain(subs)
    }

    /// Read every `*_file` secret into its key; each problem (both forms set, an unreadable or
    /// empty file, a malformed value) at the `_file` key. Called at every load, so a reload
    /// picks up a rotated file.
    pub(super) fn read_secret_files(&mut self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let problems = &mut problems;
        let read = |problems: &mut Vec<Problem>, key: &str, path: &Option<String>, set: bool| {
            read_secret(problems, key, path.as_deref()?, set)
        };
        let bad_line = |key: String| {
            Problem::new(
                key,
                "must hold one header line such as \"Authorization: Bearer <token>\"",
            )
        };
        if let Some(t) = read(
            problems,
            "admin_token_file",
            &self.admin_token_file,
            self.admin_token.is_some(),
        ) {
            self.admin_token = Some(Secret::new(t));
        }
        if let Some(r) = self.redis.as_mut() {
            if let Some(u) = read(problems, "redis.url_file", &r.url_file, !r.url.is_empty()) {
                r.url = u;
            }
        }
        for (i, a) in self.agents.iter_mut().enumerate() {
            let at = format!("agents[{i}]");
            let key = format!("{at}.ingest_token_file");
            if let Some(t) = read(
                problems,
                &key,
                &a.ingest_token_file,
                a.ingest_token.is_some(),
            ) {
                a.ingest_token = Some(Secret::new(t));
            }
            let key = format!("{at}.upstream_auth_header_file");
            if let Some(line) = read(
                problems,
                &key,
                &a.upstream_auth_header_file,
                a.upstream_auth_header.is_some(),
            ) {
                match parse_header_line(&line) {
                    Some(h) => a.upstream_auth_header = Some(h),
                    None => problems.push(bad_line(key)),
                }
            }
        }
        for (i, s) in self.subscribers.iter_mut().enumerate() {
            let at = format!("subscribers[{i}]");
            let key = format!("{at}.secret_file");
            if let Some(text) = read(problems, &key, &s.secret_file, !s.secret.is_empty()) {
                s.secret = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(Secret::new)
                    .collect();
            }
            let key = format!("{at}.auth_header_file");
            if let Some(line) = read(problems, &key, &s.auth_header_file, s.auth_header.is_some()) {
                match parse_header_line(&line) {
                    Some(h) => s.auth_header = Some(h),
                    None => problems.push(bad_line(key)),
                }
            }
        }
        std::mem::take(problems)
    }
}

/// The secret in the file at `path`, for `key` (a `*_file` key); `set`: its plain form is set too.
fn read_secret(problems: &mut Vec<Problem>, key: &str, path: &str, set: bool) -> Option<String> {
    let name = key.rsplit('.').next().unwrap_or(key);
    let plain = name.trim_end_matches("_file");
    if set {
        problems.push(Problem::new(
            key,
            format!("set {plain} or {name}, not both"),
        ));
        return None;
    }
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Some(text.trim().to_owned()),
        Ok(_) => {
            problems.push(Problem::new(key, format!("{path} is empty")));
            None
        }
        Err(e) => {
            problems.push(Problem::new(key, format!("cannot read {path}: {e}")));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_read_from_files_relative_to_the_config() {
        let dir = tempfile::tempdir().expect("dir");
        let put = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        put("admin", "admin-token-0123456789\n");
        put("ingest", "  ingest-token-0123456789  \n");
        put("auth", "Authorization: Bearer agent-secret\n");
        put("keys", "whsec_new\n\nwhsec_old\n");
        put("redis", "redis://:pw@10.0.0.1:6379\n");
        put(
            "gateway.toml",
            r#"
            listen = "127.0.0.1:0"
            admin_token_file = "admin"
            [[agents]]
            name = "a"
            url = "http://x"
            ingest_token_file = "ingest"
            upstream_auth_header_file = "auth"
            [[subscribers]]
            name = "s"
            url = "https://hooks.example.com/a2a"
            secret_file = "keys"
            [redis]
            url_file = "redis"
        "#,
        );
        let cfg = Config::load(&dir.path().join("gateway.toml")).expect("valid");
        assert!(cfg
            .admin_token
            .as_ref()
            .is_some_and(|t| t.matches(b"admin-token-0123456789")));
        let a = &cfg.agents[0];
        assert!(a
            .ingest_token
            .as_ref()
            .is_some_and(|t| t.matches(b"ingest-token-0123456789")));
        let (name, value) = a.upstream_auth_header.as_ref().expect("header");
        assert_eq!(name.as_str(), "authorization");
        assert!(value.matches(b"Bearer agent-secret"));
        let keys: Vec<&str> = cfg.subscribers[0]
            .secret
            .iter()
            .map(Secret::expose)
            .collect();
        assert_eq!(keys, ["whsec_new", "whsec_old"]);
        assert_eq!(
            cfg.redis.as_ref().map(|r| r.url.as_str()),
            Some("redis://:pw@10.0.0.1:6379")
        );
        assert!(
            !format!("{cfg:?}").contains("pw@"),
            "the password never prints"
        );
    }

    #[test]
    fn secret_file_problems_are_reported_at_their_keys() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("empty"), "\n").expect("write");
        std::fs::write(dir.path().join("bad"), "no colon here").expect("write");
        std::fs::write(
            dir.path().join("gateway.toml"),
            r#"
            listen = "127.0.0.1:0"
            admin_token = "admin-token-0123456789"
            admin_token_file = "empty"
            [[agents]]
            name = "a"
            url = "http://x"
            ingest_token_file = "missing"
            upstream_auth_header_file = "bad"
            [[subscribers]]
            name = "s"
            url = "https://hooks.example.com/a2a"
            secret = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
            secret_file = "empty"
        "#,
        )
        .expect("write");
        let p = Config::load(&dir.path().join("gateway.toml")).expect_err("broken");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "admin_token_file",
                "agents[0].ingest_token_file",
                "agents[0].upstream_auth_header_file",
                "subscribers[0].secret_file",
            ],
            "{p:#?}"
        );
        assert!(p[0].message.contains("not both"), "{}", p[0].message);
        assert!(p[1].message.contains("cannot read"), "{}", p[1].message);
    }
}
