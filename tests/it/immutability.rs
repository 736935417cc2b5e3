//! Terminal immutability and the state machine, from every direction a task can be pushed: cancel
//! of a finished task, an agent regressing on GET, out-of-order and backwards answers, a cancel
//! answer that finishes the task, an agent answering with another agent's task, and many clients
//! racing a cancel and a completion.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::sample::{Reply, Route, SampleAgent};
use crate::support::*;
use a2a_gateway::config::Conformance;
use a2a_gateway::protocol::time::parse_strict;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// One sample agent served as `a` behind a ready gateway, and one task created on it.
async fn single_task() -> (SampleAgent, TestGateway, String) {
    let (a, g) = single("a", |_| {}).await;
    let id = g.create_task("a").await;
    (a, g, id)
}

/// GET the task through the gateway (agent-less form), asserting 200.
async fn get(g: &TestGateway, id: &str) -> Resp {
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 200, "GET /tasks/{id}: {r:?}");
    r
}

/// Move the task on the agent and let the gateway record it with one GET; returns that answer.
async fn record_state(g: &TestGateway, a: &SampleAgent, id: &str, status: &str) -> Resp {
    moved(a, id, status);
    let r = get(g, id).await;
    assert_eq!(r.json()["status"], status, "{r:?}");
    r
}

fn updated_ms(task: &Value) -> i64 {
    parse_strict(task["updated_at"].as_str().expect("updated_at")).expect("strict timestamp")
}

async fn refused(g: &TestGateway, agent: &str, reason: &str) -> f64 {
    g.metric(
        "a2a_gateway_transitions_refused_total",
        &[("agent", agent), ("reason", reason)],
    )
    .await
}

/// Cancel in both forms is refused with 409 TASK_TERMINAL naming `status`, without the agent.
async fn assert_cancel_refused(g: &TestGateway, a: &SampleAgent, id: &str, status: &str) {
    let before = a.request_count(Route::CancelTask);
    for path in [
        format!("/agents/a/tasks/{id}/cancel"),
        format!("/tasks/{id}/cancel"),
    ] {
        let r = g.http.post_empty(&path).await;
        let err = assert_api_error(&r, 409, "TASK_TERMINAL");
        assert_eq!(err["details"]["status"], status, "{path}: {err}");
        assert_eq!(err["details"]["task"]["task_id"], id, "{path}: {err}");
        assert_eq!(err["details"]["task"]["status"], status, "{path}: {err}");
    }
    assert_eq!(
        a.request_count(Route::CancelTask),
        before,
        "the agent's cancel endpoint was contacted"
    );
}

// ---------------------------------------------------------------------------------------------
// Cancel of a finished task
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn cancel_of_a_completed_task_is_refused_without_contacting_the_agent() {
    let (a, g, id) = single_task().await;
    record_state(&g, &a, &id, "COMPLETED").await;
    assert_cancel_refused(&g, &a, &id, "COMPLETED").await;
}

#[tokio::test]
async fn cancel_of_a_failed_task_is_refused_without_contacting_the_agent() {
    let (a, g, id) = single_task().await;
    record_state(&g, &a, &id, "FAILED").await;
    assert_cancel_refused(&g, &a, &id, "FAILED").await;
}

#[tokio::test]
async fn cancel_of_a_cancelled_task_is_refused_without_contacting_the_agent() {
    let (a, g, id) = single_task().await;
    let r = g.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(a.request_count(Route::CancelTask), 1);
    assert_cancel_refused(&g, &a, &id, "CANCELLED").await;
}

// ---------------------------------------------------------------------------------------------
// An agent regressing on GET
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_recorded_terminal_task_comes_back_when_the_agent_claims_working_again() {
    let (a, g, id) = single_task().await;
    let completed = record_state(&g, &a, &id, "COMPLETED").await;
    let later = updated_ms(&completed.json()) + 60_000;
    a.script(
        Route::GetTask,
        Reply::Json(200, doc_at(&a, &id, "WORKING", later)),
    );
    let gets = a.request_count(Route::GetTask);
    for path in [format!("/tasks/{id}"), format!("/agents/a/tasks/{id}")] {
        let r = g.http.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.json(), completed.json(), "{path}");
        assert_eq!(r.header("x-a2a-source"), Some("ledger"), "{path}");
    }
    assert_eq!(
        a.request_count(Route::GetTask),
        gets,
        "a final task is answered without asking the agent"
    );
}

// ---------------------------------------------------------------------------------------------
// Out-of-order updates of tasks still running
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_older_update_is_refused_as_stale() {
    let (a, g, id) = single_task().await;
    record_state(&g, &a, &id, "WORKING").await;
    let input_required = record_state(&g, &a, &id, "INPUT_REQUIRED").await;
    let recorded_at = updated_ms(&input_required.json());
    a.script_once(
        Route::GetTask,
        Reply::Json(200, doc_at(&a, &id, "WORKING", recorded_at - 500)),
    );
    assert_eq!(refused(&g, "a", "stale").await, 0.0);
    let r = get(&g, &id).await;
    assert_eq!(r.json()["status"], "INPUT_REQUIRED");
    assert_eq!(
        r.body, input_required.body,
        "the recorded task, as recorded"
    );
    assert_eq!(refused(&g, "a", "stale").await, 1.0);
    // The record was not moved: the agent's real (INPUT_REQUIRED) answer is still accepted.
    let r = get(&g, &id).await;
    assert_eq!(r.json()["status"], "INPUT_REQUIRED");
    assert_eq!(refused(&g, "a", "stale").await, 1.0);
}

#[tokio::test]
async fn a_move_back_to_submitted_is_refused_as_backwards() {
    let (a, g, id) = single_task().await;
    let working = record_state(&g, &a, &id, "WORKING").await;
    let newer = updated_ms(&working.json()) + 1_000;
    a.script_once(
        Route::GetTask,
        Reply::Json(200, doc_at(&a, &id, "SUBMITTED", newer)),
    );
    let r = get(&g, &id).await;
    assert_eq!(r.json()["status"], "WORKING");
    assert_eq!(r.body, working.body, "the recorded task, as recorded");
    assert_eq!(refused(&g, "a", "backwards").await, 1.0);
    assert_eq!(refused(&g, "a", "stale").await, 0.0);
}

#[tokio::test]
async fn the_same_state_with_a_newer_updated_at_is_accepted_as_a_refresh() {
    let (a, g, id) = single_task().await;
    let working = record_state(&g, &a, &id, "WORKING").await;
    let first = updated_ms(&working.json());
    let refreshed = doc_at(&a, &id, "WORKING", first + 5_000);
    a.script_once(Route::GetTask, Reply::Json(200, refreshed.clone()));
    let r = get(&g, &id).await;
    assert_eq!(r.json(), refreshed, "the refresh is passed on");
    // A refresh changes no state, so it is not counted as a transition.
    assert_eq!(
        g.metric(
            "a2a_gateway_task_transitions_total",
            &[("from", "WORKING"), ("to", "WORKING")]
        )
        .await,
        0.0
    );
    // It was recorded: an answer between the two is now out of order.
    a.script_once(
        Route::GetTask,
        Reply::Json(200, doc_at(&a, &id, "WORKING", first + 2_500)),
    );
    let r = get(&g, &id).await;
    assert_eq!(
        r.json(),
        refreshed,
        "the refreshed task is what is recorded"
    );
    assert_eq!(refused(&g, "a", "stale").await, 1.0);
}

// ---------------------------------------------------------------------------------------------
// A cancel that finishes the task
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_terminal_cancel_answer_is_recorded_and_later_gets_come_from_the_ledger() {
    let (a, g, id) = single_task().await;
    let r = g
        .http
        .post_empty(&format!("/agents/a/tasks/{id}/cancel"))
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    let cancelled = r.json();
    assert_eq!(cancelled["status"], "CANCELLED");
    // Whatever the agent would say now, the gateway already knows the task is over.
    let later = updated_ms(&cancelled) + 60_000;
    a.script(
        Route::GetTask,
        Reply::Json(200, doc_at(&a, &id, "WORKING", later)),
    );
    for path in [format!("/tasks/{id}"), format!("/agents/a/tasks/{id}")] {
        let r = g.http.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.header("x-a2a-source"), Some("ledger"), "{path}");
        assert_eq!(r.json(), cancelled, "{path}");
    }
    assert_eq!(a.request_count(Route::GetTask), 0);
}

/// The task finishes while a cancel is on its way to the agent: the cancel did nothing, and the
/// answer says so (409 with the recorded COMPLETED task), whatever the agent claims.
#[tokio::test]
async fn a_cancel_overtaken_by_completion_is_answered_as_terminal() {
    let (a, g, id) = single_task().await;
    record_state(&g, &a, &id, "WORKING").await;
    let working_ms = updated_ms(&a.task(&id).expect("task"));
    // The agent will claim CANCELLED, but only after the gateway has recorded COMPLETED.
    let cancelled = doc_at(&a, &id, "CANCELLED", working_ms + 20);
    a.script_once(
        Route::CancelTask,
        Reply::Delay(
            Duration::from_millis(400),
            Box::new(Reply::Json(202, cancelled)),
        ),
    );
    let http = g.http.clone();
    let path = format!("/tasks/{id}/cancel");
    let cancel = tokio::spawn(async move { http.post_empty(&path).await });
    wait_for("the cancel reached the agent", || async {
        a.request_count(Route::CancelTask) == 1
    })
    .await;
    record_state(&g, &a, &id, "COMPLETED").await;
    let r = cancel.await.expect("cancel task");
    assert_eq!(r.status, 409, "{r:?}");
    assert_eq!(r.error_code(), "TASK_TERMINAL");
    assert_eq!(r.json()["error"]["details"]["status"], "COMPLETED");
    assert_eq!(get(&g, &id).await.json()["status"], "COMPLETED");
    assert_eq!(refused(&g, "a", "terminal").await, 1.0);
}

/// The agent finished the task before the gateway heard of it and refuses the cancel with 409:
/// the gateway learns the end from the agent and answers as for any recorded end.
#[tokio::test]
async fn a_cancel_the_agent_refuses_for_a_finished_task_is_answered_as_terminal() {
    let (a, g, id) = single_task().await;
    a.set_status(&id, "FAILED", fields_for("FAILED"))
        .expect("task");
    let r = g.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    assert_eq!(r.status, 409, "{r:?}");
    assert_eq!(r.error_code(), "TASK_TERMINAL");
    assert_eq!(r.json()["error"]["details"]["status"], "FAILED");
    // Recorded: the next read comes from the ledger and a second cancel never reaches the agent.
    assert_eq!(get(&g, &id).await.header("x-a2a-source"), Some("ledger"));
    let cancels = a.request_count(Route::CancelTask);
    assert_eq!(
        g.http
            .post_empty(&format!("/tasks/{id}/cancel"))
            .await
            .status,
        409
    );
    assert_eq!(a.request_count(Route::CancelTask), cancels);
}

// ---------------------------------------------------------------------------------------------
// One agent answering with another agent's task
// ---------------------------------------------------------------------------------------------

/// Agents `a` and `b`, one task each; `b` then answers GET of its task with `a`'s task, finished.
/// Returns (a, b, gateway, a's task, b's answer).
async fn foreign_answer(
    conformance: Conformance,
) -> (SampleAgent, SampleAgent, TestGateway, String, Resp) {
    let a = agent().await;
    let b = agent().await;
    let g = TestGateway::start(&[("a", &a), ("b", &b)], |cfg| {
        cfg.agents[1].conformance = conformance;
    })
    .await;
    g.ready().await;
    let ta = g.create_task("a").await;
    let tb = g.create_task("b").await;
    let forged = doc_at(
        &a,
        &ta,
        "COMPLETED",
        updated_ms(&a.task(&ta).expect("ta")) + 60_000,
    );
    b.script(Route::GetTask, Reply::Json(200, forged));
    let answer = g.http.get(&format!("/agents/b/tasks/{tb}")).await;
    (a, b, g, ta, answer)
}

/// `a`'s task, asked of the gateway in both forms, is still what `a` says: SUBMITTED.
async fn assert_untouched(g: &TestGateway, a: &SampleAgent, ta: &str) {
    for path in [format!("/tasks/{ta}"), format!("/agents/a/tasks/{ta}")] {
        let r = g.http.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.json()["status"], "SUBMITTED", "{path}: {r:?}");
        assert_eq!(
            r.header("x-a2a-source"),
            None,
            "{path}: not a finished task"
        );
    }
    let r = g.http.post_empty(&format!("/tasks/{ta}/cancel")).await;
    assert_eq!(r.status, 202, "a's task can still be cancelled: {r:?}");
    assert_eq!(a.request_count(Route::CancelTask), 1);
}

#[tokio::test]
async fn an_agent_cannot_rewrite_another_agents_task() {
    let (a, _b, g, ta, answer) = foreign_answer(Conformance::Enforce).await;
    let err = assert_api_error(&answer, 502, "AGENT_PROTOCOL_VIOLATION");
    let paths: Vec<&str> = err["details"]
        .as_array()
        .expect("details")
        .iter()
        .filter_map(|d| d["instance_path"].as_str())
        .collect();
    assert!(paths.contains(&"/task_id"), "{err}");
    assert_untouched(&g, &a, &ta).await;
}

#[tokio::test]
async fn an_agent_in_report_mode_cannot_rewrite_another_agents_task() {
    let (a, _b, g, ta, answer) = foreign_answer(Conformance::Report).await;
    // Report mode tolerates sloppy answers, not answers about another task: neither b's forgery
    // nor a's task stands in for the task the client asked b about.
    assert_api_error(&answer, 502, "AGENT_PROTOCOL_VIOLATION");
    let identity = g
        .metric(
            "a2a_gateway_protocol_violations_total",
            &[("agent", "b"), ("kind", "task_identity")],
        )
        .await;
    assert_eq!(identity, 1.0);
    assert_untouched(&g, &a, &ta).await;
}

#[tokio::test]
async fn an_agent_cannot_create_a_task_under_another_agents_task_id() {
    for conformance in [Conformance::Enforce, Conformance::Report] {
        let a = agent().await;
        let b = agent().await;
        let g = TestGateway::start(&[("a", &a), ("b", &b)], |cfg| {
            cfg.agents[1].conformance = conformance;
        })
        .await;
        g.ready().await;
        let ta = g.create_task("a").await;
        // A well-formed SUBMITTED task naming b, but with a's task id.
        let mut forged = a.task(&ta).expect("ta");
        forged["agent_id"] = json!(b.agent_id());
        forged["updated_at"] = json!(stamp(updated_ms(&forged) + 60_000));
        b.script_once(Route::CreateTask, Reply::Json(202, forged));
        let r = g.http.post_task("b").await;
        assert_api_error(&r, 502, "AGENT_PROTOCOL_VIOLATION");
        assert_eq!(
            refused(&g, "b", "foreign_agent").await,
            1.0,
            "{conformance:?}"
        );
        assert_untouched(&g, &a, &ta).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Races
// ---------------------------------------------------------------------------------------------

/// One answer a client loop saw.
struct Seen {
    /// A terminal answer had already been returned to some client when this request was sent.
    after_terminal: bool,
    status: String,
    updated_at: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_gets_never_answer_a_running_task_after_a_finished_one() {
    const LOOPS: usize = 8;
    const PER_LOOP: usize = 25;
    const WORKING_ANSWERS: usize = 30;
    /// The cancel is sent once this many GETs were answered: shortly before the switch.
    const CANCEL_AFTER: usize = WORKING_ANSWERS - 6;

    let (a, g, id) = single_task().await;
    let working = record_state(&g, &a, &id, "WORKING").await;
    let at = updated_ms(&working.json());
    // The agent says WORKING for a while (some of it out of date, some refreshes). Then its
    // WORKING answers come late and its COMPLETED ones at once, so WORKING answers are still in
    // flight when the task ends. A cancel, which the agent accepts, is sent around the switch
    // and races them. The delays only shape the interleavings: every assertion below holds
    // whatever the timing.
    for i in 0..WORKING_ANSWERS {
        let ms = at + (i as i64 % 5) - 2;
        a.script_once(
            Route::GetTask,
            Reply::Json(200, doc_at(&a, &id, "WORKING", ms)),
        );
    }
    for i in 0..LOOPS * PER_LOOP {
        let reply = if i % 4 == 3 {
            Reply::Json(200, doc_at(&a, &id, "COMPLETED", at + 10))
        } else {
            let late = doc_at(&a, &id, "WORKING", at + 3 + i as i64 % 5);
            Reply::Delay(Duration::from_millis(50), Box::new(Reply::Json(200, late)))
        };
        a.script_once(Route::GetTask, reply);
    }
    // Stamped like the COMPLETED answers, so it is never refused as out of date.
    a.script(
        Route::CancelTask,
        Reply::Json(202, doc_at(&a, &id, "CANCELLED", at + 10)),
    );

    let terminal_seen = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let cancel_now = Arc::new(tokio::sync::Notify::new());
    let mut loops = Vec::new();
    for _ in 0..LOOPS {
        let (http, id) = (g.http.clone(), id.clone());
        let (terminal_seen, answered) = (terminal_seen.clone(), answered.clone());
        let cancel_now = cancel_now.clone();
        loops.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(PER_LOOP);
            for _ in 0..PER_LOOP {
                let after_terminal = terminal_seen.load(Ordering::SeqCst);
                let r = http.get(&format!("/tasks/{id}")).await;
                assert_eq!(r.status, 200, "{r:?}");
                let t = r.json();
                let status = t["status"].as_str().expect("status").to_owned();
                if matches!(status.as_str(), "COMPLETED" | "CANCELLED" | "FAILED") {
                    terminal_seen.store(true, Ordering::SeqCst);
                }
                if answered.fetch_add(1, Ordering::SeqCst) + 1 == CANCEL_AFTER {
                    cancel_now.notify_one();
                }
                let updated_at = t["updated_at"].as_str().expect("updated_at").to_owned();
                seen.push(Seen {
                    after_terminal,
                    status,
                    updated_at,
                });
            }
            seen
        }));
    }
    let canceller = {
        let (http, id) = (g.http.clone(), id.clone());
        tokio::spawn(async move {
            cancel_now.notified().await;
            http.post_empty(&format!("/tasks/{id}/cancel")).await
        })
    };
    let mut all = Vec::new();
    for l in loops {
        all.push(l.await.expect("client loop"));
    }
    let cancel = canceller.await.expect("cancel");

    let is_terminal = |s: &str| matches!(s, "COMPLETED" | "CANCELLED" | "FAILED");
    for (n, seen) in all.iter().enumerate() {
        if let Some(first) = seen.iter().position(|s| is_terminal(&s.status)) {
            let regress: Vec<&str> = seen[first..]
                .iter()
                .filter(|s| !is_terminal(&s.status))
                .map(|s| s.status.as_str())
                .collect();
            assert!(regress.is_empty(), "loop {n} went back to {regress:?}");
        }
        // Nor does a task go back in time: every answer is the record at some instant, and the
        // record only moves forward from the WORKING recorded before the race.
        let mut last = at;
        for s in seen {
            let ms = parse_strict(&s.updated_at).expect("strict updated_at");
            assert!(
                ms >= last,
                "loop {n} saw updated_at go back from {last} to {ms}"
            );
            last = ms;
        }
    }
    let flat: Vec<&Seen> = all.iter().flatten().collect();
    assert_eq!(flat.len(), LOOPS * PER_LOOP);
    for s in &flat {
        assert!(
            !s.after_terminal || is_terminal(&s.status),
            "{} answered after a terminal answer had been given",
            s.status
        );
    }
    // One final state, the same for every client.
    let finals: std::collections::BTreeSet<(&str, &str)> = flat
        .iter()
        .filter(|s| is_terminal(&s.status))
        .map(|s| (s.status.as_str(), s.updated_at.as_str()))
        .collect();
    assert_eq!(
        finals.len(),
        1,
        "different final states were answered: {finals:?}"
    );
    let (final_status, final_at) = finals.into_iter().next().expect("a final state");
    let last = get(&g, &id).await;
    assert_eq!(last.header("x-a2a-source"), Some("ledger"));
    assert_eq!(last.json()["status"], final_status);
    assert_eq!(last.json()["updated_at"], final_at);
    match cancel.status {
        202 => assert_eq!(cancel.json()["status"], final_status, "{cancel:?}"),
        409 => {
            let err = assert_api_error(&cancel, 409, "TASK_TERMINAL");
            assert_eq!(err["details"]["status"], final_status);
        }
        other => panic!("cancel answered {other}: {cancel:?}"),
    }
}
