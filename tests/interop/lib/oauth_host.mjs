// The host's side of OAuth for the SDK clients, in memory (what a desktop host keeps in its
// keychain): a public client (PKCE, no secret) that registers dynamically unless given a
// pre-registered id, and a sign-in with no person — `authorize(url)` is whatever plays the
// browser and returns the redirect's parameters (`code`, `iss`), kept for `finishAuth`.
export class MemoryOAuthHost {
  constructor(authorize, { name = 'portcullis-interop-host', registered } = {}) {
    this.authorize = authorize;
    this.redirectUrl = 'http://127.0.0.1:1/callback';
    this.clientMetadata = {
      client_name: name,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
    this.client = registered;
    this.issued = []; // every access token the host was given
    this.authorizations = []; // every authorization URL it was sent to
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
    this.issued.push(tokens.access_token);
  }
  async redirectToAuthorization(url) {
    this.authorizations.push(new URL(url));
    this.callback = await this.authorize(url);
  }
  saveCodeVerifier(v) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'tokens') this.saved = undefined;
    if (scope === 'all' || scope === 'client') this.client = undefined;
  }
  /** The redirect's parameters (code, iss), once. */
  takeCallback() {
    const callback = this.callback;
    this.callback = undefined;
    return callback;
  }
}

/**
 * Runs `step` (a connect, a call); when it stops for a sign-in (the SDK's
 * UnauthorizedError after redirectToAuthorization), hands the callback to
 * `transport.finishAuth` and runs it again. `code`: finishAuth takes the bare code
 * (SDK 1.x) rather than the callback's parameters (v2).
 */
export async function withSignIn(host, transport, step, { isUnauthorized, code = false }) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await step();
    } catch (e) {
      if (!isUnauthorized(e) || !host.callback || attempt > 3) throw e;
      const callback = host.takeCallback();
      await transport.finishAuth(code ? callback.get('code') : callback);
    }
  }
}
