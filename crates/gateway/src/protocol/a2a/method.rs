//! The eleven methods of A2A 1.0, by their JSON-RPC names (§5.3), which equal the gRPC ones.

/// One A2A 1.0 operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `SendMessage`: SendMessageRequest → SendMessageResponse (a Task or a Message).
    SendMessage,
    /// `SendStreamingMessage`: SendMessageRequest → stream of StreamResponse.
    SendStreamingMessage,
    /// `GetTask`: GetTaskRequest → Task.
    GetTask,
    /// `ListTasks`: ListTasksRequest → ListTasksResponse.
    ListTasks,
    /// `CancelTask`: CancelTaskRequest → Task.
    CancelTask,
    /// `SubscribeToTask`: SubscribeToTaskRequest → stream of StreamResponse.
    SubscribeToTask,
    /// `CreateTaskPushNotificationConfig`: TaskPushNotificationConfig → the same, with its id.
    CreateTaskPushNotificationConfig,
    /// `GetTaskPushNotificationConfig`: GetTaskPushNotificationConfigRequest → config.
    GetTaskPushNotificationConfig,
    /// `ListTaskPushNotificationConfigs` (plural, as the proto names it).
    ListTaskPushNotificationConfigs,
    /// `DeleteTaskPushNotificationConfig`: → google.protobuf.Empty.
    DeleteTaskPushNotificationConfig,
    /// `GetExtendedAgentCard`: GetExtendedAgentCardRequest → AgentCard.
    GetExtendedAgentCard,
}

impl Method {
    /// Every method, in §5.3's order.
    pub const ALL: [Method; 11] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::ListTasks,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::CreateTaskPushNotificationConfig,
        Method::GetTaskPushNotificationConfig,
        Method::ListTaskPushNotificationConfigs,
        Method::DeleteTaskPushNotificationConfig,
        Method::GetExtendedAgentCard,
    ];

    /// The JSON-RPC method name (also the metrics label).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::SendMessage => "SendMessage",
            Method::SendStreamingMessage => "SendStreamingMessage",
            Method::GetTask => "GetTask",
            Method::ListTasks => "ListTasks",
            Method::CancelTask => "CancelTask",
            Method::SubscribeToTask => "SubscribeToTask",
            Method::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Method::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Method::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Method::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Method::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// The method named `s` exactly (case-sensitive; 0.3's `message/send` is not one).
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Whether the answer is an SSE stream of StreamResponse rather than one message.
    pub fn is_streaming(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }

    /// Whether the answer is google.protobuf.Empty. Its framing differs by binding: JSON-RPC
    /// `result` is `null` in both SDKs' servers, REST is `{}` (a2a-sdk, 200) or no body
    /// (@a2a-js/sdk, 204). A [`super::Reply`] carries it as `{}`.
    pub fn answers_empty(self) -> bool {
        matches!(self, Method::DeleteTaskPushNotificationConfig)
    }

    /// Whether the request names a task by `id` (GetTask, CancelTask, SubscribeToTask) or by
    /// `taskId` (the push-config methods); the field, if so.
    pub fn task_field(self) -> Option<&'static str> {
        match self {
            Method::GetTask | Method::CancelTask | Method::SubscribeToTask => Some("id"),
            Method::CreateTaskPushNotificationConfig
            | Method::GetTaskPushNotificationConfig
            | Method::ListTaskPushNotificationConfigs
            | Method::DeleteTaskPushNotificationConfig => Some("taskId"),
            Method::SendMessage
            | Method::SendStreamingMessage
            | Method::ListTasks
            | Method::GetExtendedAgentCard => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_exactly() {
        for m in Method::ALL {
            assert_eq!(Method::parse(m.as_str()), Some(m));
        }
        for bad in [
            "message/send",
            "tasks/get",
            "sendMessage",
            "ListTaskPushNotificationConfig",
            "",
        ] {
            assert_eq!(Method::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn streaming_and_empty_answers() {
        let streaming: Vec<_> = Method::ALL
            .into_iter()
            .filter(|m| m.is_streaming())
            .collect();
        assert_eq!(
            streaming,
            [Method::SendStreamingMessage, Method::SubscribeToTask]
        );
        assert!(Method::DeleteTaskPushNotificationConfig.answers_empty());
        assert!(!Method::GetTask.answers_empty());
        assert_eq!(Method::CancelTask.task_field(), Some("id"));
        assert_eq!(
            Method::ListTaskPushNotificationConfigs.task_field(),
            Some("taskId")
        );
        assert_eq!(Method::SendMessage.task_field(), None);
    }
}
