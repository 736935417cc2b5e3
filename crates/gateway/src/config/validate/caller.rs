//! The checks of what agents are told of who is calling: `[[agents]] identity`,
//! `token_audience`, `forward_claims` and `[auth.assertion]`.

use super::*;

/// Claims an assertion sets itself: `forward_claims` cannot name them.
const OWN_CLAIMS: [&str; 10] = [
    "iss",
    "aud",
    "sub",
    "iat",
    "exp",
    "nbf",
    "jti",
    "client_kind",
    "idp_iss",
    "idp_sub",
];

/// At most this many claims forwarded per agent.
const MAX_FORWARD_CLAIMS: usize = 32;

impl Validator {
    pub(super) fn caller(&mut self, c: &Config, rules: &dyn Rules) {
        let told = c.agents.iter().any(|a| a.identity != Identity::None);
        if let Some(a) = &c.auth.assertion {
            if a.key_files.is_empty() {
                self.problem(
                    "auth.assertion.key_files",
                    "must list at least one key (PEM PKCS#8, ECDSA P-256 or Ed25519)",
                );
            }
            for f in &a.key_files {
                if let Err(e) = rules.check(Check::AssertionKey(Path::new(f))) {
                    self.problem("auth.assertion.key_files", e);
                }
            }
        }
        for (i, a) in c.agents.iter().enumerate() {
            let at = format!("agents[{i}]");
            if a.identity == Identity::None {
                if a.token_audience.is_some() || !a.forward_claims.is_empty() {
                    self.problem(
                        format!("{at}.identity"),
                        "is \"none\": `token_audience` and `forward_claims` only apply with \"assertion\" or \"token\"",
                    );
                }
                continue;
            }
            if c.auth.assertion.is_none() {
                self.problem(
                    format!("{at}.identity"),
                    "needs [auth.assertion] key_files: the keys the gateway signs A2A-Caller with",
                );
            }
            let takes_tokens = c.auth.jwt.is_some() || !c.auth.oidc.is_empty();
            match a.identity {
                Identity::Token if a.token_audience.as_deref().is_none_or(str::is_empty) => {
                    self.problem(
                        format!("{at}.token_audience"),
                        "is required with identity = \"token\": the audience a caller's token must include to be sent on",
                    );
                }
                Identity::Token if !takes_tokens => self.problem(
                    format!("{at}.identity"),
                    "is \"token\", but no caller can present a token: configure [auth.jwt] or [[auth.oidc]]",
                ),
                Identity::Assertion if a.token_audience.is_some() => self.problem(
                    format!("{at}.token_audience"),
                    "only applies with identity = \"token\"",
                ),
                _ => {}
            }
            if a.identity == Identity::Token && !a.forward_claims.is_empty() {
                self.problem(
                    format!("{at}.forward_claims"),
                    "does nothing with identity = \"token\": a token caller's own token is sent, with all its claims",
                );
            }
            if a.forward_claims.len() > MAX_FORWARD_CLAIMS {
                self.problem(
                    format!("{at}.forward_claims"),
                    format!("names at most {MAX_FORWARD_CLAIMS} claims"),
                );
            }
            for claim in &a.forward_claims {
                if claim.is_empty() || OWN_CLAIMS.contains(&claim.as_str()) {
                    self.problem(
                        format!("{at}.forward_claims"),
                        format!("{claim:?} is a claim the assertion sets itself"),
                    );
                }
            }
        }
        if told && c.public_url.is_none() {
            self.problem(
                "public_url",
                "is required when an agent has `identity`: it is the `iss` of A2A-Caller, the same on every replica, and where agents find /.well-known/jwks.json",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn keys(toml: &str) -> Vec<String> {
        Config::parse(toml)
            .expect_err("refused")
            .into_iter()
            .map(|p| p.key)
            .collect()
    }

    fn agent(extra: &str) -> String {
        format!("listen = \"127.0.0.1:1\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n{extra}")
    }

    #[test]
    fn an_agent_told_who_calls_needs_keys_a_public_url_and_for_tokens_an_audience() {
        assert_eq!(
            keys(&agent("identity = \"token\"\nforward_claims = [\"sub\"]\n")),
            [
                "agents[0].identity",
                "agents[0].token_audience",
                "agents[0].forward_claims",
                "agents[0].forward_claims",
                "public_url"
            ]
        );
        assert_eq!(
            keys(&agent(
                "identity = \"assertion\"\ntoken_audience = \"api\"\nforward_claims = [\"iss\"]\n"
            )),
            [
                "agents[0].identity",
                "agents[0].token_audience",
                "agents[0].forward_claims",
                "public_url"
            ]
        );
        assert_eq!(
            keys(&agent("token_audience = \"api\"\n")),
            ["agents[0].identity"]
        );
        assert_eq!(
            keys(&agent("identity = \"sometimes\"\n")),
            ["agents[0].identity"]
        );
        // With keys (no file check without the gateway's rules), a public URL and a token
        // issuer: accepted.
        let ok = |agent_keys: &str| {
            format!(
                "public_url = \"https://gw.example\"\n{}[auth.assertion]\nkey_files = [\"k.pem\"]\n[[auth.oidc]]\nname = \"corp\"\nissuer = \"https://idp.example\"\naudience = \"gw\"\nscopes = {{ \"a2a\" = {{ can = [\"tasks\"] }} }}\n",
                agent(agent_keys)
            )
        };
        let c = Config::parse(&ok(
            "identity = \"assertion\"\nforward_claims = [\"email\"]\n",
        ))
        .expect("accepted");
        assert_eq!(c.agents[0].forward_claims, ["email"]);
        Config::parse(&ok("identity = \"token\"\ntoken_audience = \"api\"\n")).expect("accepted");
        // "token" without a way for a caller to present one.
        let no_issuer = format!(
            "public_url = \"https://gw.example\"\n{}[auth.assertion]\nkey_files = [\"k.pem\"]\n",
            agent("identity = \"token\"\ntoken_audience = \"api\"\n")
        );
        assert_eq!(keys(&no_issuer), ["agents[0].identity"]);
        assert_eq!(
            keys(&agent("[auth.assertion]\nkey_files = []\n")),
            ["auth.assertion.key_files"]
        );
    }
}
