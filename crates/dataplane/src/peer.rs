//! Where a request came from, as the accept phase saw it.

use std::net::SocketAddr;

use crate::headers::Forwarding;
use crate::identify::PeerIdentity;

/// Where a request came from, as the accept phase saw it.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The address the connection came in on (its port is part of the
    /// default server names).
    pub local: SocketAddr,
    /// Index of the listener in the config.
    pub listener: usize,
    pub tls: bool,
    pub identity: PeerIdentity,
    /// The forwarding headers its requests get, built once per connection.
    pub forwarding: Forwarding,
}

impl Peer {
    pub fn new(
        addr: SocketAddr,
        local: SocketAddr,
        listener: usize,
        tls: bool,
        identity: PeerIdentity,
    ) -> Peer {
        Peer {
            addr,
            local,
            listener,
            tls,
            identity,
            forwarding: Forwarding::new(addr, tls),
        }
    }
}
