//! The ledger's listing (ListTasks, `GET /tasks`) on both backends: the same random history of
//! tasks (two agents, owners and none, ties of timestamps, A2A contexts, status changes and late
//! owner claims) is listed alike by the in-process ledger and by a real redis-server, each page
//! in the listing order, every task exactly once over its pages, with the model's count; expired
//! tasks are neither listed nor counted.

use std::sync::Arc;
use std::time::Duration;

use crate::support::redis_server::RedisServer;
use a2a_gateway::ledger::listing::{Page, Position, Query, Scope};
use a2a_gateway::ledger::{Evictions, MemoryLedger, RedisLedger, TaskLedger};
use a2a_gateway::protocol::task::{Head, Status};
use bytes::Bytes;

/// xorshift64: the same history on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const AGENTS: [&str; 2] = ["alpha", "beta"];
const OWNERS: [Option<&str>; 3] = [Some("alice"), Some("bob"), None];

/// A task as the model knows it after the history.
#[derive(Debug, Clone)]
struct Known {
    key: String,
    agent: &'static str,
    owner: Option<&'static str>,
    status: Status,
    updated_ms: i64,
    context: Option<String>,
}

fn doc(key: &str, context: Option<&str>, h: Head) -> Bytes {
    let ctx = context.map_or(String::new(), |c| format!(",\"contextId\":\"{c}\""));
    Bytes::from(format!(
        "{{\"id\":\"{key}\",\"status\":\"{}\",\"at\":{}{ctx}}}",
        h.status.as_str(),
        h.updated_ms
    ))
}

/// The history, applied to `l`; what the model says it holds.
async fn history(l: &dyn TaskLedger, seed: u64, tasks: usize) -> Vec<Known> {
    let mut rng = Rng(seed);
    let mut known: Vec<Known> = Vec::new();
    for i in 0..tasks {
        let agent = AGENTS[rng.next(2) as usize];
        // Half are official A2A tasks ("{agent}/{id}", with a context), half Clawpedia ids.
        let a2a = rng.next(2) == 0;
        let key = if a2a {
            format!("{agent}/t-{i:04}")
        } else {
            format!("t-{i:04}")
        };
        let context = a2a.then(|| format!("ctx-{}", rng.next(3)));
        let owner = OWNERS[rng.next(3) as usize];
        // Few distinct timestamps: many ties.
        let head = Head {
            status: Status::Submitted,
            updated_ms: 1_000 + rng.next(40) as i64,
        };
        // Some tasks are first seen without their owner (a push), claimed later.
        let late = owner.is_some() && rng.next(4) == 0;
        l.apply(
            agent,
            &key,
            head,
            doc(&key, context.as_deref(), head),
            if late { None } else { owner },
        )
        .await
        .expect("apply");
        let mut k = Known {
            key: key.clone(),
            agent,
            owner,
            status: head.status,
            updated_ms: head.updated_ms,
            context,
        };
        if late {
            // A refused update that carries the creator's claim.
            let stale = Head {
                status: Status::Submitted,
                updated_ms: head.updated_ms - 1,
            };
            l.apply(agent, &key, stale, doc(&key, None, stale), owner)
                .await
                .expect("claim");
        }
        // Most move on, some to a final state.
        for _ in 0..rng.next(3) {
            let next = Head {
                status: [Status::Working, Status::Completed, Status::Failed][rng.next(3) as usize],
                updated_ms: k.updated_ms + rng.next(30) as i64,
            };
            let applied = l
                .apply(
                    agent,
                    &key,
                    next,
                    doc(&key, k.context.as_deref(), next),
                    None,
                )
                .await
                .expect("update");
            if applied.verdict.is_accepted() {
                k.status = next.status;
                k.updated_ms = next.updated_ms;
            }
        }
        known.push(k);
    }
    known
}

fn position(k: &Known) -> Position {
    Position {
        updated_ms: k.updated_ms,
        agent: k.agent.into(),
        key: k.key.as_str().into(),
    }
}

/// What a query should list, in order.
fn expected(known: &[Known], q: &Query) -> Vec<String> {
    let mut hits: Vec<&Known> = known
        .iter()
        .filter(|k| match &q.scope {
            Scope::All => true,
            Scope::Owner(o) => k.owner == Some(&**o),
        })
        .filter(|k| q.agents.iter().any(|a| &**a == k.agent))
        .filter(|k| q.statuses.contains(&k.status))
        .filter(|k| q.within(k.updated_ms))
        .filter(|k| {
            q.context
                .as_deref()
                .is_none_or(|c| k.context.as_deref() == Some(c))
        })
        .collect();
    hits.sort_by_key(|k| position(k));
    hits.into_iter().map(|k| k.key.clone()).collect()
}

/// Every page of `q`, `limit` at a time.
async fn pages(l: &dyn TaskLedger, mut q: Query) -> (Vec<String>, Vec<u64>) {
    let mut keys = Vec::new();
    let mut totals = Vec::new();
    for _ in 0..10_000 {
        let page: Page = l.list(&q).await.expect("list");
        assert!(page.tasks.len() <= q.limit);
        totals.push(page.total);
        keys.extend(page.tasks.iter().map(|t| t.key.to_string()));
        match page.next {
            Some(p) => {
                assert_eq!(page.tasks.len(), q.limit, "a page before the last is full");
                assert_eq!(Some(&*p.key), page.tasks.last().map(|t| &*t.key));
                q.after = Some(p);
            }
            None => return (keys, totals),
        }
    }
    panic!("the listing never ended");
}

fn queries() -> Vec<Query> {
    let all_agents: Vec<Arc<str>> = AGENTS.iter().map(|a| Arc::from(*a)).collect();
    let mut out = Vec::new();
    for scope in [
        Scope::All,
        Scope::Owner("alice".into()),
        Scope::Owner("bob".into()),
    ] {
        for agents in [all_agents.clone(), vec![Arc::from("beta")]] {
            for statuses in [Status::ALL.to_vec(), vec![Status::Completed]] {
                for (since_ms, context) in
                    [(None, None), (Some(1_020), None), (None, Some("ctx-1"))]
                {
                    for limit in [1, 7, 50] {
                        out.push(Query {
                            scope: scope.clone(),
                            agents: agents.clone(),
                            statuses: statuses.clone(),
                            since_ms,
                            context: context.map(Arc::from),
                            after: None,
                            limit,
                        });
                    }
                }
            }
        }
    }
    out
}

async fn lists_as_the_model_says(l: &dyn TaskLedger, seed: u64) -> Vec<Vec<String>> {
    let known = history(l, seed, 300).await;
    let mut all = Vec::new();
    for q in queries() {
        let want = expected(&known, &q);
        let (got, totals) = pages(l, q.clone()).await;
        assert_eq!(got, want, "{q:?}");
        assert!(
            totals.iter().all(|t| *t == want.len() as u64),
            "totals {totals:?} for {} tasks: {q:?}",
            want.len()
        );
        all.push(got);
    }
    // The history is not empty, and the filters do cut it.
    assert!(all.iter().any(|k| k.len() > 100));
    assert!(all.iter().any(|k| !k.is_empty() && k.len() < 30));
    all
}

#[tokio::test]
async fn both_ledgers_list_every_task_once_in_order_with_its_count() {
    let memory = MemoryLedger::new(10_000, Duration::from_secs(600), Evictions::unregistered());
    let r = RedisServer::start();
    let redis = RedisLedger::connect(&r.url(), "t:", Duration::from_secs(600))
        .await
        .expect("redis ledger connects");
    let a = lists_as_the_model_says(&memory, 7).await;
    let b = lists_as_the_model_says(&redis, 7).await;
    assert_eq!(a, b);
}

/// Both stores keeping a final task for 300 ms: a redis-server of their own (kept alive by the
/// first value) with `prefix`, and the in-process ledger.
async fn both_keeping_final_tasks_300ms(prefix: &str) -> (RedisServer, RedisLedger, MemoryLedger) {
    let r = RedisServer::start();
    let redis = RedisLedger::connect(&r.url(), prefix, Duration::from_millis(300))
        .await
        .expect("redis ledger connects");
    let memory = MemoryLedger::new(100, Duration::from_millis(300), Evictions::unregistered());
    (r, redis, memory)
}

/// A task that leaves the ledger (its retention over) is neither listed nor counted, on both.
#[tokio::test]
async fn expired_tasks_are_neither_listed_nor_counted() {
    let (_r, redis, memory) = both_keeping_final_tasks_300ms("x:").await;
    for l in [&redis as &dyn TaskLedger, &memory] {
        for (i, status) in [Status::Completed, Status::Working].into_iter().enumerate() {
            let key = format!("t-{i}");
            let h = Head {
                status,
                updated_ms: 5_000 + i as i64,
            };
            l.apply("alpha", &key, h, doc(&key, None, h), Some("alice"))
                .await
                .expect("apply");
        }
        let q = Query {
            scope: Scope::Owner("alice".into()),
            agents: vec!["alpha".into()],
            statuses: Status::ALL.to_vec(),
            since_ms: None,
            context: None,
            after: None,
            limit: 10,
        };
        assert_eq!(l.list(&q).await.expect("list").total, 2);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let page = l.list(&q).await.expect("list");
        let keys: Vec<_> = page.tasks.iter().map(|t| t.key.to_string()).collect();
        assert_eq!(keys, ["t-1"], "the final task expired, the live one stays");
        assert_eq!(page.total, 1);
    }
}

/// A task whose record expired and is then recorded again (a late push, without its owner) is
/// listed as it is now: in every task's listing, and no longer in its former owner's.
#[tokio::test]
async fn a_task_recorded_again_after_it_expired_is_listed_as_it_is_now() {
    let (_r, redis, memory) = both_keeping_final_tasks_300ms("again:").await;
    for l in [&redis as &dyn TaskLedger, &memory] {
        let done = |ms| Head {
            status: Status::Completed,
            updated_ms: ms,
        };
        l.apply(
            "alpha",
            "t-x",
            done(7_000),
            doc("t-x", None, done(7_000)),
            Some("alice"),
        )
        .await
        .expect("apply");
        tokio::time::sleep(Duration::from_millis(600)).await;
        l.apply(
            "alpha",
            "t-x",
            done(8_000),
            doc("t-x", None, done(8_000)),
            None,
        )
        .await
        .expect("apply again");
        let q = |scope| Query {
            scope,
            agents: vec!["alpha".into()],
            statuses: Status::ALL.to_vec(),
            since_ms: None,
            context: None,
            after: None,
            limit: 10,
        };
        let all = l.list(&q(Scope::All)).await.expect("list");
        let keys: Vec<_> = all.tasks.iter().map(|t| t.key.to_string()).collect();
        assert_eq!((keys, all.total), (vec!["t-x".to_owned()], 1));
        let alice = l
            .list(&q(Scope::Owner("alice".into())))
            .await
            .expect("list");
        assert_eq!((alice.tasks.len(), alice.total), (0, 0));
    }
}
