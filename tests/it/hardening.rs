//! Issue 9's classes, over real loopback HTTP with a scripted hostile
//! upstream: each test generates the variants of one class (message shapes,
//! Host and Origin spellings, upstream refusals, request-body tricks, limits
//! on the last round, concurrent replays, local URL names) instead of one
//! example, and checks what reaches the client, what reaches the upstream and
//! what is counted.

mod head;
mod retries;
mod shapes;

use portcullis::server::RunningGateway;

/// The value of the metric line named `name` whose labels contain every
/// `label="value"` pair in `labels` (0 when there is none).
pub async fn metric(gw: &RunningGateway, name: &str, labels: &[&str]) -> u64 {
    let admin = gw
        .admin_addr
        .expect("the test gateway has an admin listener");
    let text = crate::common::client()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|p| l.contains(p)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The data of every event of an event-stream body.
pub fn events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}
