/**
 * The sign-in pop-up's return page (`/console/callback`): hands its URL (the
 * authorization code, `state` and `iss`) back to the console window that
 * opened it, then removes the code from the address bar and closes. The code
 * alone is worthless: only the opening window holds the PKCE verifier and the
 * DPoP key that redeem it.
 */
const CALLBACK_MESSAGE = 'cell-console-callback';
const CALLBACK_CHANNEL = 'cell-console-sign-in';

const message = { type: CALLBACK_MESSAGE, url: window.location.href };
let delivered = false;
try {
  if (window.opener && !(window.opener as Window).closed) {
    (window.opener as Window).postMessage(message, window.location.origin);
    delivered = true;
  }
} catch {
  delivered = false;
}
try {
  // The opener link can be cut (a window manager, another browsing context group): same-origin broadcast too.
  const ch = new BroadcastChannel(CALLBACK_CHANNEL);
  ch.postMessage(message);
  ch.close();
  delivered = true;
} catch {
  // no BroadcastChannel: the opener message is the only way
}
window.history.replaceState(null, '', window.location.pathname);
const status = document.getElementById('callback-status');
if (status) {
  status.textContent = delivered
    ? 'Signed in. This window closes by itself; if it does not, close it.'
    : 'The console window that asked for this sign-in is gone: start again from the console.';
}
if (delivered) setTimeout(() => window.close(), 100);
