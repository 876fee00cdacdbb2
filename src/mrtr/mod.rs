//! The gateway as the MRTR boundary: sealed `requestState`, checked retries,
//! validated answers, round limits.

pub mod answers;
pub mod value_scan;
pub mod seal;
pub mod replay;
//PENDING pub mod retry;
