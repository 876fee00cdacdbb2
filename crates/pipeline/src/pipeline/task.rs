//! Phase: a request about a task of the Tasks extension. A route that
//! refuses tasks refuses every `tasks/*` request here. Otherwise the
//! gateway's state a `tasks/get` or `tasks/cancel` brings back is opened
//! and checked (same caller, same upstream, same task) and the upstream's
//! own put in its place; a `tasks/update` is an answer, so it must bring
//! one, and its answers get the one answer check before anything goes
//! upstream; answers on any other `tasks/*` request are refused. A refusal
//! here means nothing was forwarded.

use bytes::Bytes;
use serde_json::value::RawValue;

use super::ctx::RequestCtx;
use crate::audit::AuditEvent;
use crate::config::TaskMode;
use crate::json::MessageKind;
use crate::model::{McpMethod, Reason, Refusal};
use crate::mrtr::retry::RetryRefused;
use crate::mrtr::task::TaskRequest;

/// When the request is about a task and brought the gateway's state: the
/// body to forward.
pub(crate) async fn check(ctx: &mut RequestCtx) -> Result<Option<Bytes>, Refusal> {
    let request = &ctx.request;
    let method = request.method;
    if !method.is_tasks_method() || request.kind != MessageKind::Request {
        return Ok(None);
    }
    if ctx.route.config.tasks == TaskMode::Refuse {
        return Err(Refusal::new(
            Reason::TasksRefused,
            format!("this endpoint does not serve tasks ({method})"),
        ));
    }
    // Answers travel in tasks/update only, under the answer check; an
    // upstream written to an earlier draft (answers on tasks/get) would
    // take them unchecked anywhere else.
    if request.input_responses && method != McpMethod::TasksUpdate {
        return Err(Refusal::new(
            Reason::InvalidAnswer,
            format!("{method} carries no answers; a task's answers go in tasks/update"),
        ));
    }
    // Every task the gateway delivers carries its state and a 2026-07-28
    // client echoes the latest: without one a request could read (and then
    // answer) a task another caller started. 2025-11-25 has no task state:
    // its get and cancel go on as written.
    let state_given = request.request_state.is_some() || request.request_state_not_string;
    let stateless = request.generation() == crate::model::Generation::Stateless;
    let needs_state = stateless || method == McpMethod::TasksUpdate;
    if !method.is_task_request() || (!state_given && !needs_state) {
        return Ok(None);
    }
    // Boxed: this future is large (the state store's calls) and most
    // requests never get here; inline it would size every request's future.
    match Box::pin(accept(ctx)).await {
        Ok(body) => Ok(Some(body)),
        Err(r) => Err(super::retry::refused(ctx, r)),
    }
}

async fn accept(ctx: &mut RequestCtx) -> Result<Bytes, RetryRefused> {
    let request = &ctx.request;
    let token = match (&request.request_state, request.request_state_not_string) {
        (_, true) => {
            return Err(Refusal::new(Reason::StateInvalid, "requestState must be a string").into())
        }
        (None, false) => {
            return Err(Refusal::new(
                Reason::StateMissing,
                format!(
                    "{} came without the requestState this gateway delivered with the task; send the latest one",
                    request.method
                ),
            )
            .into())
        }
        (Some(token), false) => token.as_str(),
    };
    let task_id = request.target.as_deref().ok_or_else(|| {
        RetryRefused::from(Refusal::new(
            Reason::InvalidRequest,
            format!("{} needs params.taskId", request.method),
        ))
    })?;
    let id: &RawValue = request
        .id()
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or_else(|| {
            RetryRefused::from(Refusal::new(
                Reason::InvalidRequest,
                "a task request has an id",
            ))
        })?;
    let task = TaskRequest {
        id,
        method: request.method,
        task_id,
        token,
        params: request.params_map(),
    };
    let binding = ctx.binding();
    let accepted = ctx.gateway.mrtr.check_task_request(&binding, task).await?;
    let audit = &ctx.gateway.audit;
    if audit.enabled() && ctx.request.method == McpMethod::TasksUpdate {
        let at = ctx
            .audit_context()
            .with_operation(&accepted.prior.operation, accepted.prior.round);
        audit.emit(&at, AuditEvent::retry_ok(&accepted.answers));
        audit.emit(
            &at,
            AuditEvent::forwarded(&accepted.answers, &accepted.prior),
        );
    }
    let body = accepted.body.clone();
    ctx.task = Some(Box::new(accepted));
    Ok(body)
}
