/**
 * The console's two HTML pages and the headers of everything under /console:
 * the application (`GET /console`) and the sign-in pop-up's return page
 * (`GET /console/callback`, the redirect URI of the console's OAuth client).
 * Every byte comes from the cell; the Content-Security-Policy allows only the
 * cell's own origin, no inline script or style, no framing, no plug-ins, and
 * requires Trusted Types for script sinks (no string becomes HTML or code).
 */
import { NO_FRAMING_HEADERS, pageHeaders, SELF_ONLY_CSP_DIRECTIVES } from '../../runtime/page-headers.ts';

export const CONSOLE_PATH = '/console';
export const CONSOLE_ASSETS_PATH = `${CONSOLE_PATH}/assets`;
export const CONSOLE_CALLBACK_PATH = `${CONSOLE_PATH}/callback`;
export const CONSOLE_CONFIG_PATH = `${CONSOLE_PATH}/config.json`;

/** The console's policy: its own origin only (connect-src included: no request leaves the cell). */
export const CONSOLE_CSP = [
  ...SELF_ONLY_CSP_DIRECTIVES,
  "worker-src 'none'",
  "manifest-src 'none'",
  // No string reaches an HTML or script sink (innerHTML, eval, script src): the console builds its DOM with Preact.
  "require-trusted-types-for 'script'",
].join('; ');

/** Headers every /console response carries (the return page's URL carries an authorization code: no referrer). */
export const CONSOLE_HEADERS = pageHeaders(CONSOLE_CSP, NO_FRAMING_HEADERS);

export const CONSOLE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-cell console</title>
<link rel="stylesheet" href="${CONSOLE_ASSETS_PATH}/console.css">
<link rel="icon" href="data:,">
</head>
<body>
<div id="app"><noscript>The console needs JavaScript.</noscript></div>
<script type="module" src="${CONSOLE_ASSETS_PATH}/console.js"></script>
</body>
</html>
`;

export const CALLBACK_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Signing in - agent-cell console</title>
<link rel="stylesheet" href="${CONSOLE_ASSETS_PATH}/console.css">
<link rel="icon" href="data:,">
</head>
<body>
<main class="callback"><h1>Signing in</h1><p id="callback-status" role="status">Returning to the console...</p></main>
<script type="module" src="${CONSOLE_ASSETS_PATH}/callback.js"></script>
</body>
</html>
`;
