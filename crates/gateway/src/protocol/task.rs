//! The ledger's vocabulary, shared by every protocol: a task's states, the state machine and
//! the one rule every source of news about a task goes through. A protocol maps its own task
//! documents to a [`TaskRef`] (and its spelling of states to [`Status`]); the rule itself knows
//! no protocol.
//!
//! The gateway does not see every step an agent takes (it may learn WORKING only from a push, or
//! first meet a task already INPUT_REQUIRED), so an update is judged by *reachability* from the
//! recorded state plus its `updated_at`, not by single edges.

use serde::{Deserialize, Serialize};

/// The states a task can be in, spelled as the ledger stores them (in Redis, metrics and
/// `/events`), which is also how the Clawpedia protocol spells its six. The official A2A
/// protocol has two more, AUTH_REQUIRED (interrupted, like INPUT_REQUIRED) and REJECTED (final);
/// a Clawpedia document naming them is refused by [`Status::parse_clawpedia`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// Received by the agent, not yet started.
    Submitted,
    /// The agent is working on it.
    Working,
    /// The agent waits for more input from the client.
    InputRequired,
    /// Done, successfully (terminal).
    Completed,
    /// Ended in failure (terminal).
    Failed,
    /// Cancelled before it finished (terminal).
    Cancelled,
    /// The agent waits for the client to authenticate (A2A only; interrupted).
    AuthRequired,
    /// The agent declined the task (A2A only; terminal).
    Rejected,
}

impl Status {
    /// Every state, in the order [`Status::index`] counts them.
    pub const ALL: [Status; 8] = [
        Status::Submitted,
        Status::Working,
        Status::InputRequired,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
        Status::AuthRequired,
        Status::Rejected,
    ];

    /// How many states there are (the length of per-state counters).
    pub const COUNT: usize = Status::ALL.len();

    /// The state as A2A spells it (`INPUT_REQUIRED`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Submitted => "SUBMITTED",
            Status::Working => "WORKING",
            Status::InputRequired => "INPUT_REQUIRED",
            Status::Completed => "COMPLETED",
            Status::Failed => "FAILED",
            Status::Cancelled => "CANCELLED",
            Status::AuthRequired => "AUTH_REQUIRED",
            Status::Rejected => "REJECTED",
        }
    }

    /// The state the ledger spells `s`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// One of the six states of the Clawpedia protocol spelled `s`; `None` for anything else
    /// (AUTH_REQUIRED and REJECTED are not Clawpedia states).
    pub fn parse_clawpedia(s: &str) -> Option<Status> {
        Status::parse(s).filter(|st| !matches!(st, Status::AuthRequired | Status::Rejected))
    }

    /// Index into [`Status::ALL`], for per-state counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// COMPLETED, FAILED, CANCELLED and REJECTED are final.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Completed | Status::Failed | Status::Cancelled | Status::Rejected
        )
    }

    /// INPUT_REQUIRED and AUTH_REQUIRED: the task waits for its client, not for its agent.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Status::InputRequired | Status::AuthRequired)
    }

    /// Whether `to` can follow `self` through zero or more steps of the protocol's edges:
    /// SUBMITTED→WORKING; WORKING→INPUT_REQUIRED|COMPLETED|FAILED|CANCELLED; INPUT_REQUIRED→WORKING;
    /// any non-terminal→CANCELLED|FAILED; A2A's AUTH_REQUIRED as INPUT_REQUIRED, and REJECTED
    /// from any non-terminal state. The same state is reachable (a refresh).
    pub fn reaches(self, to: Status) -> bool {
        use Status::*;
        if self == to {
            return true;
        }
        match self {
            Completed | Failed | Cancelled | Rejected => false,
            // Nothing leads back to SUBMITTED.
            Submitted | Working | InputRequired | AuthRequired => to != Submitted,
        }
    }
}

/// What the ledger knows of a task, enough to judge the next update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The task's state.
    pub status: Status,
    /// `updated_at` in ms since the epoch.
    pub updated_ms: i64,
}

/// Why an update was not accepted. The label is used in metrics and error details.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The recorded task is COMPLETED, FAILED or CANCELLED.
    Terminal,
    /// The new state cannot follow the recorded one (e.g. WORKING → SUBMITTED).
    Backwards,
    /// Reachable, but older than what is recorded (an out-of-order delivery).
    Stale,
    /// The task is recorded under another agent: one agent may not rewrite another's task.
    ForeignAgent,
}

impl Refusal {
    /// The label of the refusal in metrics and error details (`foreign_agent`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Terminal => "terminal",
            Refusal::Backwards => "backwards",
            Refusal::Stale => "stale",
            Refusal::ForeignAgent => "foreign_agent",
        }
    }

    /// The refusal a label names (the inverse of [`Refusal::as_str`]).
    pub fn parse(s: &str) -> Option<Refusal> {
        [
            Refusal::Terminal,
            Refusal::Backwards,
            Refusal::Stale,
            Refusal::ForeignAgent,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// The outcome of judging one update against the recorded head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// First sighting of the task.
    New,
    /// A change of state.
    Transition {
        /// The state recorded before.
        from: Status,
    },
    /// Same state, newer `updated_at`.
    Refresh,
    /// Exactly what is recorded (same state and `updated_at`): acknowledged, nothing changes.
    Duplicate,
    /// Not recorded, and why.
    Refused(Refusal),
}

impl Verdict {
    /// The update changes the record (and is to be announced as a change).
    pub fn is_accepted(self) -> bool {
        matches!(
            self,
            Verdict::New | Verdict::Transition { .. } | Verdict::Refresh
        )
    }

    /// A short name of the verdict (`new`, `transition`, `refresh`, `duplicate`, or the
    /// refusal's reason), for spans and logs.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::New => "new",
            Verdict::Transition { .. } => "transition",
            Verdict::Refresh => "refresh",
            Verdict::Duplicate => "duplicate",
            Verdict::Refused(r) => r.as_str(),
        }
    }
}

/// The rule. Pure: the ledger implementations (memory, Redis) apply exactly this.
pub fn judge(recorded: Option<Head>, update: Head) -> Verdict {
    let Some(rec) = recorded else {
        return Verdict::New;
    };
    if rec.status.is_terminal() {
        return if rec == update {
            Verdict::Duplicate
        } else {
            Verdict::Refused(Refusal::Terminal)
        };
    }
    if !rec.status.reaches(update.status) {
        return Verdict::Refused(Refusal::Backwards);
    }
    if update.updated_ms < rec.updated_ms {
        return Verdict::Refused(Refusal::Stale);
    }
    if update.status == rec.status {
        if update.updated_ms == rec.updated_ms {
            Verdict::Duplicate
        } else {
            Verdict::Refresh
        }
    } else {
        Verdict::Transition { from: rec.status }
    }
}

/// What the ledger records and judges a task document by, read by the task's protocol (for
/// Clawpedia, `clawpedia::task::task_ref`): its id and its state at a time. Everything else of
/// the document is the protocol's, and the ledger keeps it as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// The task's id.
    pub task_id: String,
    /// Its state, and when it took it.
    pub head: Head,
    /// Its A2A `contextId` (none for a Clawpedia task), for the ledger's listing by context:
    /// read with the head, so the ledger need not read the document again.
    pub context: Option<std::sync::Arc<str>>,
    /// A digest of what the document says besides its state that a push config hears of (for
    /// A2A: the status message and the artifacts; `digest::Digest`, never 0), or 0 for a
    /// protocol whose receivers hear of transitions only. The ledger keeps it with the record:
    /// an update in the same state whose content differs is a refresh, and news for the task's
    /// push configs (`ledger::decide`, `ledger::news`).
    pub content: u64,
}

#[cfg(test)]
mod tests {
    use super::Status::*;
    use super::*;

    fn h(status: Status, updated_ms: i64) -> Head {
        Head { status, updated_ms }
    }

    #[test]
    fn the_protocol_edges_are_reachable() {
        for (from, to) in [
            (Submitted, Working),
            (Working, InputRequired),
            (Working, Completed),
            (Working, Failed),
            (Working, Cancelled),
            (InputRequired, Working),
            (Submitted, Cancelled),
            (Submitted, Failed),
            (InputRequired, Cancelled),
            (InputRequired, Failed),
            // Through unseen steps.
            (Submitted, Completed),
            (Submitted, InputRequired),
            (InputRequired, Completed),
        ] {
            assert!(from.reaches(to), "{from:?} -> {to:?}");
        }
    }

    #[test]
    fn nothing_leaves_a_terminal_state_or_returns_to_submitted() {
        for from in [Completed, Failed, Cancelled, Rejected] {
            for to in Status::ALL {
                assert_eq!(from.reaches(to), from == to, "{from:?} -> {to:?}");
            }
        }
        for from in [Working, InputRequired] {
            assert!(!from.reaches(Submitted));
        }
    }

    #[test]
    fn clawpedia_has_six_states_and_a2a_two_more() {
        assert_eq!(Status::parse_clawpedia("WORKING"), Some(Working));
        assert_eq!(Status::parse_clawpedia("REJECTED"), None);
        assert_eq!(Status::parse_clawpedia("AUTH_REQUIRED"), None);
        assert_eq!(Status::parse("REJECTED"), Some(Rejected));
        assert!(Rejected.is_terminal() && !AuthRequired.is_terminal());
        assert!(AuthRequired.is_interrupted() && InputRequired.is_interrupted());
        assert!(AuthRequired.reaches(Working) && Working.reaches(Rejected));
        assert!(!Rejected.reaches(Working));
    }

    #[test]
    fn judge_accepts_forward_and_refreshes() {
        assert_eq!(judge(None, h(Working, 5)), Verdict::New);
        assert_eq!(
            judge(Some(h(Submitted, 1)), h(Working, 2)),
            Verdict::Transition { from: Submitted }
        );
        assert_eq!(
            judge(Some(h(Working, 2)), h(Completed, 2)),
            Verdict::Transition { from: Working }
        );
        assert_eq!(judge(Some(h(Working, 2)), h(Working, 3)), Verdict::Refresh);
        assert_eq!(
            judge(Some(h(Working, 2)), h(Working, 2)),
            Verdict::Duplicate
        );
    }

    #[test]
    fn judge_refuses_every_regression() {
        assert_eq!(
            judge(Some(h(Completed, 5)), h(Working, 9)),
            Verdict::Refused(Refusal::Terminal)
        );
        assert_eq!(
            judge(Some(h(Completed, 5)), h(Completed, 9)),
            Verdict::Refused(Refusal::Terminal)
        );
        assert_eq!(
            judge(Some(h(Cancelled, 5)), h(Failed, 9)),
            Verdict::Refused(Refusal::Terminal)
        );
        assert_eq!(
            judge(Some(h(Cancelled, 5)), h(Cancelled, 5)),
            Verdict::Duplicate
        );
        assert_eq!(
            judge(Some(h(Working, 5)), h(Submitted, 9)),
            Verdict::Refused(Refusal::Backwards)
        );
        // Reachable but older: an out-of-order delivery.
        assert_eq!(
            judge(Some(h(InputRequired, 6)), h(Working, 5)),
            Verdict::Refused(Refusal::Stale)
        );
        assert_eq!(
            judge(Some(h(Working, 6)), h(Completed, 5)),
            Verdict::Refused(Refusal::Stale)
        );
    }
}
