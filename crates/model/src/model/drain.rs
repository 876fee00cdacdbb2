//! The drain deadline as the open event streams see it: when the gateway
//! gives up waiting for in-flight requests, each stream ends with a final
//! `shutting_down` error event instead of a torn connection.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::watch;

/// Flipped once, when the drain deadline passes.
#[derive(Debug)]
pub struct DrainSignal {
    cut: watch::Sender<bool>,
}

impl Default for DrainSignal {
    fn default() -> Self {
        DrainSignal {
            cut: watch::channel(false).0,
        }
    }
}

impl DrainSignal {
    /// The drain deadline passed: open streams end now.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Resolves when [`DrainSignal::cut`] is called (at once if it was).
    pub fn cut_off(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let mut rx = self.cut.subscribe();
        Box::pin(async move {
            // An error means the sender is gone: the gateway is, too, and
            // nothing will ever cut this stream.
            if rx.wait_for(|cut| *cut).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cut_reaches_streams_that_listen_before_and_after_it() {
        let signal = DrainSignal::default();
        let early = signal.cut_off();
        let pending = tokio::time::timeout(std::time::Duration::from_millis(20), signal.cut_off());
        assert!(pending.await.is_err(), "no cut yet");
        signal.cut();
        early.await;
        signal.cut_off().await;
    }
}
