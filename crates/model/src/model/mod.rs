//! Leaf types every phase shares: the method table, client capabilities,
//! what was asked, protocol versions, and the refusal reasons. Depends on
//! nothing else in the crate, so nothing here can form a cycle.

mod asked;
mod caps;
mod clock;
mod drain;
mod federated;
mod health;
mod invisible;
mod method;
mod name_table;
mod protocol;
mod reason;
pub mod secret_env;
mod settings;
mod shape;

pub use asked::{Asked, FieldKind, FormField, FormSchema, RequestKind, RequestShape, TextFormat};
pub use caps::{ClientCaps, TASKS_EXTENSION};
pub use clock::{system_clock, Clock, Deadline, ManualClock, SharedClock, SystemClock};
pub use drain::DrainSignal;
pub use federated::{
    expose, separator, split, valid_prefix, Carriage, NAME_SEPARATOR, URI_SEPARATOR,
};
pub use health::{
    AuditLoss, AuditSinkKind, Fallback, Health, HealthReport, StoreFailure, StoreUser,
};
pub use invisible::{is_joining, Invisible};
pub use method::{ListMember, McpMethod, TargetKind, TargetMember};
pub use protocol::{Generation, ProtocolVersion};
pub use reason::{markdown_table as reason_table, printable_name, Reason, ReasonSet, Refusal};
pub use settings::{toml_syntax_message, ConfigError, SettingsError};
pub use shape::{Field as ShapeField, Shape};
