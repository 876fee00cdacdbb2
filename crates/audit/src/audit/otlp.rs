//! `[audit.otlp]`: every audit event also as one OpenTelemetry log record,
//! exported over OTLP/HTTP (protobuf) in batches by the SDK's batch log
//! processor.
//!
//! A record is the event's JSON object: its `event` is the record's event
//! name (and body), its `ts` the record's time, every other member an
//! attribute with the same name and value (objects and lists as OTLP maps
//! and arrays; `null`, a member not known yet, is left out). The
//! request's span, when it was traced, is the record's trace context. So a
//! record holds exactly what the JSON line holds: names, never values.
//!
//! *Bounded, counted, never blocking.* The SDK's processor drops records
//! when its queue is full but only says so in its own log; here every
//! record is admitted against `max_queue` first and counted out when its
//! batch has been exported (or failed), so the SDK's queue of the same size
//! never overflows and every loss is counted by cause: `queue_full` at
//! admission, `write_failed` for a batch the collector did not take.
//! Admission is one atomic update on the request path; the export runs on
//! the processor's thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry::{Key, SpanId, TraceFlags, TraceId};
use opentelemetry_http::HttpClient;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::{
    BatchConfigBuilder, BatchLogProcessor, LogBatch, LogExporter, SdkLogger, SdkLoggerProvider,
};
use opentelemetry_sdk::Resource;
use serde_json::Value;

use crate::model::AuditLoss;

use super::drops::Drops;
use super::event::AuditEvent;
use super::line::TraceIds;
use super::otlp_config::OtlpLogSettings;

/// The instrumentation scope of the records.
const SCOPE: &str = "portcullis.audit";

/// The OTLP log exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("audit OTLP exporter: {0}")]
pub struct OtlpLogsError(#[from] opentelemetry_otlp::ExporterBuildError);

/// Records admitted and not yet exported, against the configured bound.
#[derive(Debug)]
struct Queue {
    pending: AtomicUsize,
    capacity: usize,
    dropped: Arc<Drops>,
}

impl Queue {
    fn admit(&self) -> bool {
        self.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.capacity).then_some(n + 1)
            })
            .is_ok()
    }

    fn done(&self, n: usize) {
        let _ = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                Some(p.saturating_sub(n))
            });
    }
}

/// The exporter, counting each batch out of the queue (and as lost when
/// the collector did not take it).
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    queue: Arc<Queue>,
}

impl<E: LogExporter> LogExporter for Counted<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let n = batch.iter().count();
        let result = self.inner.export(batch).await;
        self.queue.done(n);
        if result.is_err() {
            self.queue.dropped.note(n as u64, AuditLoss::WriteFailed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The running export: the SDK's provider (batching, its thread) and the
/// logger records are emitted through.
pub(super) struct OtlpLogs {
    /// `None` only while dropping.
    provider: Option<SdkLoggerProvider>,
    logger: SdkLogger,
    queue: Arc<Queue>,
}

impl OtlpLogs {
    /// Build the exporter over `client` and start the batch processor's
    /// thread. Nothing is sent until the first batch.
    pub(super) fn start<C: HttpClient + 'static>(
        settings: &OtlpLogSettings,
        client: C,
        dropped: Arc<Drops>,
    ) -> Result<OtlpLogs, OtlpLogsError> {
        let exporter = opentelemetry_otlp::LogExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.to_string())
            .with_timeout(settings.export_timeout)
            .with_http_client(client)
            .build()?;
        let queue = Arc::new(Queue {
            pending: AtomicUsize::new(0),
            capacity: settings.max_queue,
            dropped,
        });
        let batch = BatchConfigBuilder::default()
            .with_scheduled_delay(settings.export_interval)
            .with_max_queue_size(settings.max_queue)
            .with_max_export_batch_size(settings.max_queue.min(512))
            .build();
        let exporter = Counted {
            inner: exporter,
            queue: queue.clone(),
        };
        let processor = BatchLogProcessor::builder(exporter)
            .with_batch_config(batch)
            .build();
        let resource = Resource::builder_empty()
            .with_service_name(settings.service_name.clone())
            .build();
        let provider = SdkLoggerProvider::builder()
            .with_log_processor(processor)
            .with_resource(resource)
            .build();
        let logger = provider.logger(SCOPE);
        Ok(OtlpLogs {
            provider: Some(provider),
            logger,
            queue,
        })
    }

    /// Queue one event's record, or count it as dropped when the queue is
    /// full (then `object` is never built). Never blocks.
    pub(super) fn emit(
        &self,
        at: SystemTime,
        event: &AuditEvent,
        trace: Option<TraceIds>,
        object: impl FnOnce() -> serde_json::Result<Value>,
    ) {
        if !self.queue.admit() {
            self.queue.dropped.note(1, AuditLoss::QueueFull);
            return;
        }
        let Ok(Value::Object(members)) = object() else {
            self.queue.done(1);
            self.queue.dropped.note(1, AuditLoss::Unencodable);
            return;
        };
        let name = event.name();
        let (severity, severity_text) = severity(event);
        let mut record = self.logger.create_log_record();
        record.set_event_name(name);
        record.set_body(AnyValue::from(name));
        record.set_timestamp(at);
        record.set_observed_timestamp(at);
        record.set_severity_number(severity);
        record.set_severity_text(severity_text);
        record.add_attributes(
            members
                .into_iter()
                .filter(|(k, _)| k != "ts")
                .filter_map(|(k, v)| Some((Key::from(k), any_value(v)?))),
        );
        if let Some(t) = trace {
            let flags = if t.sampled {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            };
            record.set_trace_context(
                TraceId::from_bytes(t.trace_id),
                SpanId::from_bytes(t.span_id),
                Some(flags),
            );
        }
        self.logger.emit(record);
    }

    /// Export everything queued now and wait for it (up to the export
    /// timeout). Blocking: call off the runtime's workers.
    pub(super) fn flush(&self) {
        if let Some(p) = &self.provider {
            if let Err(e) = p.force_flush() {
                tracing::warn!("audit records at flush: {e}");
            }
        }
    }
}

impl Drop for OtlpLogs {
    /// The SDK's shutdown waits for the last export; a sink is often
    /// dropped on a runtime worker (a reload replacing it), whose runtime
    /// the export itself needs, so the wait happens on a thread of its own.
    fn drop(&mut self) {
        let Some(provider) = self.provider.take() else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("portcullis-audit-otlp-stop".into())
            .spawn(move || {
                if let Err(e) = provider.shutdown() {
                    tracing::debug!("audit records at shutdown: {e}");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot stop the audit record export: {e}");
        }
    }
}

/// A refusal and a changed listed definition are what an operator is
/// warned about; every other step is information.
fn severity(event: &AuditEvent) -> (Severity, &'static str) {
    match event {
        AuditEvent::Refused { .. }
        | AuditEvent::ListingChanged { .. }
        | AuditEvent::ConfigWeakened { .. } => (Severity::Warn, "WARN"),
        _ => (Severity::Info, "INFO"),
    }
}

/// A JSON value as an OTLP value; `null` is no value.
fn any_value(v: Value) -> Option<AnyValue> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => AnyValue::Boolean(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => AnyValue::Int(i),
            None => AnyValue::Double(n.as_f64()?),
        },
        Value::String(s) => AnyValue::from(s),
        Value::Array(items) => {
            AnyValue::ListAny(Box::new(items.into_iter().filter_map(any_value).collect()))
        }
        Value::Object(members) => AnyValue::Map(Box::new(
            members
                .into_iter()
                .filter_map(|(k, v)| Some((Key::from(k), any_value(v)?)))
                .collect(),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_members_become_otlp_values_of_the_same_shape() {
        let v = json!({"a": 1, "b": [true, "x", null], "c": {"d": 2.5, "e": null}});
        let Some(AnyValue::Map(m)) = any_value(v) else {
            panic!("a map")
        };
        assert_eq!(m[&Key::from("a")], AnyValue::Int(1));
        assert_eq!(
            m[&Key::from("b")],
            AnyValue::ListAny(Box::new(vec![AnyValue::Boolean(true), AnyValue::from("x")]))
        );
        let Some(AnyValue::Map(c)) = m.get(&Key::from("c")).cloned() else {
            panic!("a nested map")
        };
        assert_eq!(c.len(), 1, "null is no value");
        assert_eq!(any_value(Value::Null), None);
    }

    #[test]
    fn refusals_and_changed_listings_are_warnings() {
        let refused = AuditEvent::Refused {
            reason: crate::model::Reason::RoundLimitExceeded,
            rule: None,
            key: None,
            field: None,
        };
        assert_eq!(severity(&refused), (Severity::Warn, "WARN"));
        let forwarded = AuditEvent::Forwarded {
            keys: Vec::new(),
            upstream_state: false,
        };
        assert_eq!(severity(&forwarded), (Severity::Info, "INFO"));
    }

    #[test]
    fn the_queue_admits_up_to_its_bound_and_counts_out_exported_batches() {
        let q = Queue {
            pending: AtomicUsize::new(0),
            capacity: 2,
            dropped: Arc::new(Drops::for_test()),
        };
        assert!(q.admit() && q.admit());
        assert!(!q.admit(), "full");
        q.done(2);
        assert!(q.admit());
        q.done(5);
        assert_eq!(q.pending.load(Ordering::Relaxed), 0, "never below zero");
    }
}
