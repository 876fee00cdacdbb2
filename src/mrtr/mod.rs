//! The gateway as the MRTR boundary: sealed `requestState`, checked retries,
//! validated answers, round limits.

pub mod answers;
pub mod replay;
pub mod retry;
pub mod seal;
pub mod value_scan;
