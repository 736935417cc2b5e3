//! The agent's memory: tasks, their artifacts and their open streams, behind one lock held only
//! for map operations (never across an await). Bounded by `max_tasks`: the oldest task goes
//! first, taking its artifacts and streams with it.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::NewArtifact;

/// Events a slow stream reader may fall behind by before its stream is dropped (a pusher never
/// waits for a reader).
pub(crate) const STREAM_QUEUE: usize = 256;

/// Terminal states are final (spec: "Terminal states ... are final and immutable").
pub(crate) fn is_terminal(status: &str) -> bool {
    matches!(status, "COMPLETED" | "FAILED" | "CANCELLED")
}

/// Milliseconds since the epoch, the resolution of the spec's timestamps.
pub(crate) fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// `YYYY-MM-DDTHH:MM:SS.sssZ`, the spec's timestamp format.
pub(crate) fn iso(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// What the content endpoint serves for an artifact; `Bytes` clones are cheap.
#[derive(Clone)]
pub(crate) enum Content {
    /// text, log, url and json artifacts: the content itself.
    Inline {
        content_type: &'static str,
        body: Bytes,
    },
    /// A file served directly.
    File { mime_type: String, body: Bytes },
    /// A file answered with a 302 to the download URL.
    Redirect { mime_type: String, body: Bytes },
}

struct StoredArtifact {
    json: Value,
    content: Content,
}

struct Entry {
    task: Map<String, Value>,
    /// Last `updated_at` given, so the next one is strictly later even within a millisecond.
    last_ms: i64,
    artifacts: Vec<String>,
    streams: Vec<mpsc::Sender<Bytes>>,
    opened: usize,
}

impl Entry {
    fn status(&self) -> &str {
        self.task
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    fn bump(&mut self) {
        self.last_ms = now_ms().max(self.last_ms + 1);
        self.task
            .insert("updated_at".into(), Value::String(iso(self.last_ms)));
    }
}

/// Outcome of a cancel request.
pub(crate) enum Cancel {
    Unknown,
    Terminal,
    Cancelled(Value),
}

/// Outcome of opening a stream.
pub(crate) enum Opened {
    Unknown,
    Terminal,
    Stream(mpsc::Receiver<Bytes>),
}

/// Tasks in creation order, with their artifacts and streams.
pub(crate) struct Store {
    tasks: HashMap<String, Entry>,
    order: VecDeque<String>,
    artifacts: HashMap<String, StoredArtifact>,
    max_tasks: usize,
}

impl Store {
    pub(crate) fn new(max_tasks: usize) -> Self {
        Store {
            tasks: HashMap::new(),
            order: VecDeque::new(),
            artifacts: HashMap::new(),
            max_tasks: max_tasks.max(1),
        }
    }

    /// Creates a SUBMITTED task, evicting the oldest if full; returns its id and the serialized
    /// task for the 202 answer.
    pub(crate) fn create(&mut self, agent_id: &str, input: Value) -> (String, Bytes) {
        while self.tasks.len() >= self.max_tasks {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(entry) = self.tasks.remove(&old) {
                for id in entry.artifacts {
                    self.artifacts.remove(&id);
                }
            }
        }
        let task_id = uuid::Uuid::new_v4().to_string();
        let ms = now_ms();
        let stamp = Value::String(iso(ms));
        let mut task = Map::new();
        task.insert("task_id".into(), Value::String(task_id.clone()));
        task.insert("agent_id".into(), Value::String(agent_id.to_string()));
        task.insert("status".into(), Value::String("SUBMITTED".into()));
        task.insert("input".into(), input);
        task.insert("created_at".into(), stamp.clone());
        task.insert("updated_at".into(), stamp);
        let body = Bytes::from(serde_json::to_vec(&task).unwrap_or_default());
        let entry = Entry {
            task,
            last_ms: ms,
            artifacts: Vec::new(),
            streams: Vec::new(),
            opened: 0,
        };
        self.tasks.insert(task_id.clone(), entry);
        self.order.push_back(task_id.clone());
        (task_id, body)
    }

    pub(crate) fn get(&self, task_id: &str) -> Option<Value> {
        self.tasks
            .get(task_id)
            .map(|e| Value::Object(e.task.clone()))
    }

    /// Serialized task, for GET answers without an intermediate `Value`.
    pub(crate) fn get_bytes(&self, task_id: &str) -> Option<Bytes> {
        let entry = self.tasks.get(task_id)?;
        Some(Bytes::from(
            serde_json::to_vec(&entry.task).unwrap_or_default(),
        ))
    }

    pub(crate) fn task_ids(&self) -> Vec<String> {
        self.order.iter().cloned().collect()
    }

    /// Sets `status` (only if the task is currently in `from`, when given), bumps `updated_at`,
    /// then merges the fields of `extra` so a script can override anything. Returns the task.
    pub(crate) fn set_status(
        &mut self,
        task_id: &str,
        from: Option<&str>,
        status: &str,
        extra: Value,
    ) -> Option<Value> {
        let entry = self.tasks.get_mut(task_id)?;
        if from.is_some_and(|f| entry.status() != f) {
            return None;
        }
        entry
            .task
            .insert("status".into(), Value::String(status.to_string()));
        entry.bump();
        if let Value::Object(fields) = extra {
            entry.task.extend(fields);
        }
        Some(Value::Object(entry.task.clone()))
    }

    /// The spec's cancel: only a non-terminal task moves to CANCELLED.
    pub(crate) fn cancel(&mut self, task_id: &str) -> Cancel {
        match self.tasks.get(task_id) {
            None => Cancel::Unknown,
            Some(e) if is_terminal(e.status()) => Cancel::Terminal,
            Some(_) => match self.set_status(task_id, None, "CANCELLED", Value::Null) {
                Some(task) => Cancel::Cancelled(task),
                None => Cancel::Unknown,
            },
        }
    }

    /// Stores an artifact of a known task; `false` (nothing stored) for an unknown one.
    pub(crate) fn add_artifact(
        &mut self,
        task_id: &str,
        artifact_id: &str,
        artifact: NewArtifact,
        base_url: &str,
        description: Option<&str>,
    ) -> bool {
        let Some(entry) = self.tasks.get_mut(task_id) else {
            return false;
        };
        let download = format!("{base_url}/artifacts/{artifact_id}/content");
        let mut meta = json!({ "created_at": iso(now_ms()) });
        let inline = |ty: &str, ct: &'static str, text: String| {
            let body = Bytes::from(text.clone());
            (
                ty.to_string(),
                text,
                Content::Inline {
                    content_type: ct,
                    body,
                },
            )
        };
        let (ty, content, stored) = match artifact {
            NewArtifact::Text(t) => inline("text", "text/plain; charset=utf-8", t),
            NewArtifact::Log(t) => inline("log", "text/plain; charset=utf-8", t),
            NewArtifact::Url(u) => inline("url", "text/plain; charset=utf-8", u),
            NewArtifact::Json(v) => inline("json", "application/json", v.to_string()),
            NewArtifact::File {
                filename,
                mime_type,
                body,
            } => {
                meta["filename"] = Value::String(filename);
                meta["mime_type"] = Value::String(mime_type.clone());
                ("file".into(), download, Content::File { mime_type, body })
            }
            NewArtifact::Redirect {
                filename,
                mime_type,
                body,
            } => {
                meta["filename"] = Value::String(filename);
                meta["mime_type"] = Value::String(mime_type.clone());
                (
                    "file".into(),
                    download,
                    Content::Redirect { mime_type, body },
                )
            }
        };
        if let Some(d) = description {
            meta["description"] = Value::String(d.to_string());
        }
        let json = json!({
            "artifact_id": artifact_id,
            "task_id": task_id,
            "type": ty,
            "content": content,
            "metadata": meta,
        });
        entry.artifacts.push(artifact_id.to_string());
        self.artifacts.insert(
            artifact_id.to_string(),
            StoredArtifact {
                json,
                content: stored,
            },
        );
        true
    }

    /// The task's artifacts in creation order; `None` for an unknown task.
    pub(crate) fn artifacts_of(&self, task_id: &str) -> Option<Vec<Value>> {
        let entry = self.tasks.get(task_id)?;
        Some(
            entry
                .artifacts
                .iter()
                .filter_map(|id| self.artifacts.get(id).map(|a| a.json.clone()))
                .collect(),
        )
    }

    pub(crate) fn content(&self, artifact_id: &str) -> Option<Content> {
        self.artifacts.get(artifact_id).map(|a| a.content.clone())
    }

    /// Registers a new stream of a non-terminal task.
    pub(crate) fn open_stream(&mut self, task_id: &str) -> Opened {
        let Some(entry) = self.tasks.get_mut(task_id) else {
            return Opened::Unknown;
        };
        entry.opened += 1;
        if is_terminal(entry.status()) {
            return Opened::Terminal;
        }
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        entry.streams.retain(|s| !s.is_closed());
        entry.streams.push(tx);
        Opened::Stream(rx)
    }

    /// Queues bytes on every open stream of the task; a stream whose queue is full or whose
    /// reader left is dropped (it ends after what it already has).
    pub(crate) fn send(&mut self, task_id: &str, bytes: &Bytes) {
        if let Some(entry) = self.tasks.get_mut(task_id) {
            entry.streams.retain(|s| s.try_send(bytes.clone()).is_ok());
        }
    }

    pub(crate) fn close_streams(&mut self, task_id: &str) {
        if let Some(entry) = self.tasks.get_mut(task_id) {
            entry.streams.clear();
        }
    }

    pub(crate) fn stream_connections(&mut self, task_id: &str) -> usize {
        self.tasks.get_mut(task_id).map_or(0, |e| {
            e.streams.retain(|s| !s.is_closed());
            e.streams.len()
        })
    }

    pub(crate) fn streams_opened(&self, task_id: &str) -> usize {
        self.tasks.get(task_id).map_or(0, |e| e.opened)
    }
}
