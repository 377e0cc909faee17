/**
 * Signing in with the cell's own authorization server: authorization code +
 * PKCE (S256) for the console's built-in public client, in a pop-up window so
 * that this page, and the secrets only it holds, live on:
 *
 * 1. the PKCE verifier and `state` are made here and kept in this function's
 *    memory; the pop-up opens `/oauth/authorize` (login and consent pages);
 * 2. the pop-up returns to `/console/callback`, which hands its URL back
 *    (`postMessage` to this window, or a same-origin BroadcastChannel) and
 *    closes; oauth4webapi checks `state` and `iss`;
 * 3. an ES256 DPoP key pair is generated with WebCrypto, its private key not
 *    extractable; the code is redeemed at `/oauth/token` with a DPoP proof, so
 *    the token is bound to that key (`cnf.jkt`) and useless without it.
 *
 * Nothing is written to storage. oauth4webapi is the OAuth client.
 */
import * as oauth from 'oauth4webapi';
import type { ConsoleConfig } from '../config.ts';
import { identify, oauthSession, type Session } from './session.ts';

export const CALLBACK_MESSAGE = 'cell-console-callback';
export const CALLBACK_CHANNEL = 'cell-console-sign-in';

export class SignInError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'SignInError';
  }
}

function insecureOrigin(): boolean {
  return window.location.protocol !== 'https:';
}

/** The authorization server's metadata, checked against the configured issuer. */
async function metadata(cfg: ConsoleConfig): Promise<oauth.AuthorizationServer> {
  const res = await fetch('/.well-known/oauth-authorization-server', { credentials: 'omit', cache: 'no-store' });
  return oauth.processDiscoveryResponse(new URL(cfg.issuer), res);
}

/** Waits for the pop-up's return URL carrying `state`; rejects when the pop-up closes first. */
function waitForCallback(popup: Window, state: string, signal: AbortSignal): Promise<URL> {
  return new Promise((resolve, reject) => {
    let channel: BroadcastChannel | null = null;
    const done = () => {
      window.removeEventListener('message', onMessage);
      channel?.close();
      clearInterval(watch);
    };
    const accept = (data: unknown) => {
      if (typeof data !== 'object' || data === null) return;
      const d = data as { type?: unknown; url?: unknown };
      if (d.type !== CALLBACK_MESSAGE || typeof d.url !== 'string') return;
      let u: URL;
      try {
        u = new URL(d.url);
      } catch {
        return;
      }
      if (u.origin !== window.location.origin || u.searchParams.get('state') !== state) return;
      done();
      resolve(u);
    };
    const onMessage = (e: MessageEvent) => {
      if (e.origin === window.location.origin) accept(e.data);
    };
    window.addEventListener('message', onMessage);
    try {
      channel = new BroadcastChannel(CALLBACK_CHANNEL);
      channel.onmessage = (e) => accept(e.data);
    } catch {
      channel = null;
    }
    const watch = setInterval(() => {
      if (popup.closed) {
        // The message may still be in flight when the window closes: give it a moment.
        setTimeout(() => {
          done();
          reject(new SignInError('popup_closed', 'The sign-in window was closed before signing in finished.'));
        }, 500);
        clearInterval(watch);
      }
    }, 400);
    signal.addEventListener(
      'abort',
      () => {
        done();
        popup.close();
        reject(new SignInError('cancelled', 'Signing in was cancelled.'));
      },
      { once: true },
    );
  });
}

/** Signs in through the pop-up and returns the session (DPoP-bound token in memory). */
export async function signInWithCell(cfg: ConsoleConfig, signal: AbortSignal): Promise<Session> {
  // Opened first, synchronously in the click, so pop-up blockers allow it.
  const popup = window.open('about:blank', 'cell-console-sign-in', 'popup=yes,width=560,height=720');
  if (!popup)
    throw new SignInError('popup_blocked', 'The browser blocked the sign-in window: allow pop-ups for this page, or paste an API key.');
  try {
    const as = await metadata(cfg);
    const client: oauth.Client = { client_id: cfg.client_id, token_endpoint_auth_method: 'none' };
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const authorize = new URL(as.authorization_endpoint ?? '/oauth/authorize', window.location.origin);
    if (authorize.origin !== window.location.origin)
      throw new SignInError('foreign_authorization_server', 'The authorization endpoint is not on this cell.');
    authorize.search = new URLSearchParams({
      response_type: 'code',
      client_id: cfg.client_id,
      redirect_uri: cfg.redirect_uri,
      scope: '*',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();
    popup.location.href = authorize.href;
    const back = await waitForCallback(popup, state, signal);
    let params: URLSearchParams;
    try {
      params = oauth.validateAuthResponse(as, client, back, state);
    } catch (e) {
      if (e instanceof oauth.AuthorizationResponseError) {
        throw new SignInError(
          e.error,
          e.error === 'access_denied'
            ? 'Access was denied on the consent screen.'
            : `The cell refused the sign-in: ${e.error_description ?? e.error}`,
        );
      }
      throw e;
    }
    const keyPair = await oauth.generateKeyPair('ES256', { extractable: false });
    const dpop = oauth.DPoP(client, keyPair);
    const insecure = insecureOrigin();
    const res = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, cfg.redirect_uri, verifier, {
      DPoP: dpop,
      ...(insecure ? { [oauth.allowInsecureRequests]: true } : {}),
    });
    const token = await oauth.processAuthorizationCodeResponse(as, client, res);
    const revoke = async (accessToken: string) => {
      // RFC 7009 at the cell: the token stops working now, not when it expires.
      const r = await oauth.revocationRequest(
        as,
        client,
        oauth.None(),
        accessToken,
        insecure ? { [oauth.allowInsecureRequests]: true } : {},
      );
      await oauth.processRevocationResponse(r);
    };
    const session = oauthSession(token, dpop, insecure, revoke);
    if (!(await identify(session))) throw new SignInError('token_refused', 'The cell refused the new access token.');
    return session;
  } catch (e) {
    if (!popup.closed) popup.close();
    throw e;
  }
}
