//! Who is calling: API keys, JWT bearer tokens, mTLS client certificates. (being written)
