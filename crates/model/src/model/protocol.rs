//! Protocol versions and the two generations of MCP over Streamable HTTP the
//! gateway carries: 2026-07-28 (stateless, MRTR) and 2025-11-25 (sessions,
//! pushed server-to-client requests).

/// A protocol version the gateway can police.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolVersion {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

/// How a generation carries a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Generation {
    /// 2026-07-28: every request stands alone (`_meta`, `Mcp-Method`), input
    /// is asked for with `input_required` results.
    Stateless,
    /// 2025-11-25 (and 2025-06-18, 2025-03-26): `initialize`,
    /// `Mcp-Session-Id`, input pushed as server-to-client requests on event
    /// streams.
    Sessions,
}

impl ProtocolVersion {
    /// Newest first: the order of `data.supported` in a -32022 refusal.
    pub const ALL: &'static [ProtocolVersion] = &[
        ProtocolVersion::V2026_07_28,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
    ];

    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        ProtocolVersion::ALL
            .iter()
            .copied()
            .find(|v| v.as_str() == s)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    pub const fn generation(self) -> Generation {
        match self {
            ProtocolVersion::V2026_07_28 => Generation::Stateless,
            ProtocolVersion::V2025_03_26
            | ProtocolVersion::V2025_06_18
            | ProtocolVersion::V2025_11_25 => Generation::Sessions,
        }
    }
}

impl Generation {
    pub const ALL: &'static [Generation] = &[Generation::Stateless, Generation::Sessions];

    /// The metric label and config name: the generation's newest version.
    pub const fn as_str(self) -> &'static str {
        match self {
            Generation::Stateless => "2026-07-28",
            Generation::Sessions => "2025-11-25",
        }
    }

    pub fn parse(s: &str) -> Option<Generation> {
        ProtocolVersion::parse(s).map(ProtocolVersion::generation)
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ProtocolVersion {}
