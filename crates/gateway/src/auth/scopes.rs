//! `[[auth.oidc]] scopes`: what a token of an identity provider may do, from the scopes it
//! carries (its `scope` or `scp` claim). Each issuer's table is built once, with the config
//! (start and reload); a token's grant is looked up when it is verified, and cached with it.
//! A token gets the union of its mapped scopes' agents, rights and methods; a scope the table
//! does not name grants nothing, so a token without a mapped scope may do nothing.

use std::collections::{BTreeMap, HashMap};

use super::client::{Agents, Methods, Rights};
use crate::config::ScopeRights;

/// What a token's scopes grant it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The agents it may use.
    pub agents: Agents,
    /// What it may do.
    pub rights: Rights,
    /// The official A2A methods it may call.
    pub methods: Methods,
}

impl Grant {
    /// Nothing: no agent, no right, no method.
    fn none() -> Grant {
        Grant {
            agents: Agents::Only(Vec::new()),
            rights: Rights::default(),
            methods: Methods::NONE,
        }
    }

    /// Add what `other` grants.
    fn add(&mut self, other: &Grant) {
        self.agents.union(&other.agents);
        self.rights = self.rights.union(other.rights);
        self.methods = self.methods.union(other.methods);
    }
}

/// One issuer's scopes and what each grants.
#[derive(Debug, Default)]
pub struct ScopeTable(HashMap<Box<str>, Grant>);

impl ScopeTable {
    /// The table of `[[auth.oidc]] scopes` (checked: rights and methods are known names).
    pub fn new(scopes: &BTreeMap<String, ScopeRights>) -> ScopeTable {
        ScopeTable(
            scopes
                .iter()
                .map(|(name, r)| {
                    let grant = Grant {
                        agents: Agents::of(&r.agents),
                        rights: Rights::of(&r.can),
                        methods: Methods::of(&r.methods),
                    };
                    (name.as_str().into(), grant)
                })
                .collect(),
        )
    }

    /// What a token carrying `scopes` may do: the union of its mapped scopes' grants; nothing
    /// when none is mapped.
    pub fn grant<'a>(&self, scopes: impl IntoIterator<Item = &'a str>) -> Grant {
        let mut out = Grant::none();
        for s in scopes {
            if let Some(g) = self.0.get(s) {
                out.add(g);
            }
        }
        out
    }

    /// Whether no scope is mapped (every token of the issuer may do nothing).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Right;
    use crate::protocol::a2a::Method;

    fn table(toml: &str) -> ScopeTable {
        #[derive(serde::Deserialize)]
        struct T {
            scopes: BTreeMap<String, ScopeRights>,
        }
        let t: T = toml::from_str(toml).expect("scopes");
        ScopeTable::new(&t.scopes)
    }

    fn methods(g: &Grant) -> Vec<Method> {
        Method::ALL
            .into_iter()
            .filter(|m| g.methods.has(*m))
            .collect()
    }

    #[test]
    fn a_tokens_grant_is_the_union_of_its_mapped_scopes() {
        let t = table(
            r#"
            [scopes."a2a.read"]
            can = ["tasks"]
            methods = ["GetTask", "ListTasks"]
            agents = ["echo"]
            [scopes."a2a.send"]
            can = ["tasks", "streams"]
            methods = ["SendMessage"]
            agents = ["echo", "billing"]
            [scopes."a2a.ops"]
            can = ["metrics"]
            methods = []
            "#,
        );
        let read = t.grant(["a2a.read"]);
        assert_eq!(read.agents, Agents::Only(vec!["echo".into()]));
        assert!(read.rights.has(Right::Tasks) && !read.rights.has(Right::Streams));
        assert_eq!(methods(&read), [Method::GetTask, Method::ListTasks]);
        // Two scopes: both lists of agents, both rights, both methods.
        let both = t.grant(["a2a.read", "openid", "a2a.send"]);
        assert_eq!(
            both.agents,
            Agents::Only(vec!["echo".into(), "billing".into()])
        );
        assert!(both.rights.has(Right::Tasks) && both.rights.has(Right::Streams));
        assert!(!both.rights.has(Right::Metrics));
        assert_eq!(
            methods(&both),
            [Method::SendMessage, Method::GetTask, Method::ListTasks]
        );
        // A scope with every agent (the default) makes the union every agent.
        let all = t.grant(["a2a.send", "a2a.ops"]);
        assert_eq!(all.agents, Agents::All);
        assert!(all.rights.has(Right::Metrics) && all.rights.has(Right::Streams));
        assert_eq!(methods(&all), [Method::SendMessage]);
        // No mapped scope, or none at all: nothing.
        for none in [t.grant(["openid", "a2a"]), t.grant([])] {
            assert_eq!(none, Grant::none());
            assert!(!Right::ALL.into_iter().any(|r| none.rights.has(r)));
            assert!(methods(&none).is_empty());
        }
        // Scopes are compared exactly.
        assert_eq!(t.grant(["A2A.READ", "a2a.read "]), Grant::none());
    }

    #[test]
    fn a_scope_without_can_grants_no_right_and_without_methods_every_method() {
        let t = table("[scopes.bare]\n");
        let g = t.grant(["bare"]);
        assert_eq!(g.agents, Agents::All);
        assert!(!Right::ALL.into_iter().any(|r| g.rights.has(r)));
        assert_eq!(g.methods, Methods::ALL);
        assert!(ScopeTable::default().is_empty() && !t.is_empty());
    }
}
