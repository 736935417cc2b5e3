//! The enums of A2A 1.0 as the proto spells them in ProtoJSON (`TASK_STATE_*`, `ROLE_*`).
//!
//! `TASK_STATE_UNSPECIFIED` is the proto's zero value, not a state: a task an agent reports in it
//! tells nothing, so [`TaskState::parse`] refuses it. A ListTasks filter may still name it (it
//! means "no filter"), which the request checks allow separately.

use crate::protocol::task::Status;

/// The lifecycle state of an A2A task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Received and acknowledged.
    Submitted,
    /// Being processed.
    Working,
    /// Waiting for the client's input (interrupted).
    InputRequired,
    /// Waiting for authentication (interrupted).
    AuthRequired,
    /// Finished successfully (final).
    Completed,
    /// Finished with an error (final).
    Failed,
    /// Canceled before it finished (final).
    Canceled,
    /// The agent declined the task (final).
    Rejected,
}

impl TaskState {
    /// Every state an agent may report.
    pub const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::AuthRequired,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ];

    /// The proto's zero value: a valid ListTasks filter ("any"), never a task's state.
    pub const UNSPECIFIED: &'static str = "TASK_STATE_UNSPECIFIED";

    /// The ProtoJSON name (`TASK_STATE_INPUT_REQUIRED`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
        }
    }

    /// The state named `s` exactly; `None` for `TASK_STATE_UNSPECIFIED`, 0.3's kebab-case names,
    /// integers written as strings and anything else.
    pub fn parse(s: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// COMPLETED, FAILED, CANCELED and REJECTED: nothing may follow them.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// INPUT_REQUIRED and AUTH_REQUIRED: the task waits for the client, and a SendMessage naming
    /// it resumes it. A stream closes here too (§11.7).
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

impl TaskState {
    /// The ledger's state for this one (`CANCELED` is the ledger's `CANCELLED`).
    pub fn status(self) -> Status {
        match self {
            TaskState::Submitted => Status::Submitted,
            TaskState::Working => Status::Working,
            TaskState::InputRequired => Status::InputRequired,
            TaskState::AuthRequired => Status::AuthRequired,
            TaskState::Completed => Status::Completed,
            TaskState::Failed => Status::Failed,
            TaskState::Canceled => Status::Cancelled,
            TaskState::Rejected => Status::Rejected,
        }
    }

    /// The A2A state the ledger records as `status` (the inverse of [`TaskState::status`]).
    pub fn of_status(status: Status) -> TaskState {
        match status {
            Status::Submitted => TaskState::Submitted,
            Status::Working => TaskState::Working,
            Status::InputRequired => TaskState::InputRequired,
            Status::AuthRequired => TaskState::AuthRequired,
            Status::Completed => TaskState::Completed,
            Status::Failed => TaskState::Failed,
            Status::Cancelled => TaskState::Canceled,
            Status::Rejected => TaskState::Rejected,
        }
    }
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The client.
    User,
    /// The agent.
    Agent,
}

impl Role {
    /// The ProtoJSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "ROLE_USER",
            Role::Agent => "ROLE_AGENT",
        }
    }

    /// The role named `s`; `None` for `ROLE_UNSPECIFIED` and anything else.
    pub fn parse(s: &str) -> Option<Role> {
        [Role::User, Role::Agent]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_classify() {
        for s in TaskState::ALL {
            assert_eq!(TaskState::parse(s.as_str()), Some(s));
            assert!(!(s.is_final() && s.is_interrupted()));
        }
        let finals: Vec<_> = TaskState::ALL
            .into_iter()
            .filter(|s| s.is_final())
            .collect();
        assert_eq!(
            finals,
            [
                TaskState::Completed,
                TaskState::Failed,
                TaskState::Canceled,
                TaskState::Rejected
            ]
        );
        assert!(TaskState::InputRequired.is_interrupted());
        assert!(TaskState::AuthRequired.is_interrupted());
        assert!(!TaskState::Working.is_interrupted());
    }

    #[test]
    fn other_spellings_are_unknown() {
        for bad in [
            "TASK_STATE_UNSPECIFIED",
            "COMPLETED",
            "completed",
            "TASK_STATE_CANCELLED",
            "input-required",
            "task_state_completed",
            "3",
            "",
        ] {
            assert_eq!(TaskState::parse(bad), None, "{bad}");
        }
        assert_eq!(Role::parse("ROLE_USER"), Some(Role::User));
        assert_eq!(Role::parse("ROLE_AGENT"), Some(Role::Agent));
        assert_eq!(Role::parse("ROLE_UNSPECIFIED"), None);
        assert_eq!(Role::parse("user"), None);
    }
}
