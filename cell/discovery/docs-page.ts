/**
 * The interactive docs page: Swagger UI over the curated document, every
 * byte served by the cell itself (swagger-ui-dist, embedded in the bundle)
 * under a Content-Security-Policy that allows only the cell's own origin.
 * No inline script or style: the page loads its init script as a file.
 */
import { etagOf, pageHeaders, SELF_ONLY_CSP_DIRECTIVES } from '../../runtime/page-headers.ts';
import { swaggerFile } from './internal/swagger-files.ts';

export const DOCS_PATH = '/api/public/v1/docs';
export const DOCS_ASSETS_PATH = `${DOCS_PATH}/assets`;
export const OPENAPI_PATH = '/api/public/v1/openapi.json';

/** The page's policy: its own origin only, no inline code, no framing. */
export const DOCS_CSP = SELF_ONLY_CSP_DIRECTIVES.join('; ');

/** Headers every docs response carries. */
export const DOCS_HEADERS = pageHeaders(DOCS_CSP);

export const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-cell API</title>
<link rel="stylesheet" href="${DOCS_ASSETS_PATH}/swagger-ui.css">
<link rel="icon" href="data:,">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${DOCS_ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="${DOCS_ASSETS_PATH}/docs-init.js"></script>
</body>
</html>
`;

const INIT_SCRIPT = `// Starts Swagger UI on the cell's curated document. No external validator,
// no remote configuration: everything comes from this origin.
window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: ${JSON.stringify(OPENAPI_PATH)},
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    queryConfigEnabled: false,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'BaseLayout',
    displayRequestDuration: true,
  });
});
`;

export interface DocsAsset {
  body: string;
  contentType: string;
  etag: string;
}

/** Drops the trailing source-map comment: the map is not served. */
function stripSourceMap(text: string): string {
  return text.replace(/\n?\/[*/]# sourceMappingURL=[^\n]*\s*$/, '\n');
}

function asset(body: string, contentType: string): DocsAsset {
  return { body, contentType, etag: etagOf(body) };
}

let cache: Map<string, DocsAsset> | null = null;

/** The docs page's static files by name (loaded once). */
export function docsAssets(): ReadonlyMap<string, DocsAsset> {
  if (!cache) {
    cache = new Map([
      ['swagger-ui-bundle.js', asset(stripSourceMap(swaggerFile('swagger-ui-bundle.js')), 'text/javascript; charset=utf-8')],
      ['swagger-ui.css', asset(stripSourceMap(swaggerFile('swagger-ui.css')), 'text/css; charset=utf-8')],
      ['docs-init.js', asset(INIT_SCRIPT, 'text/javascript; charset=utf-8')],
    ]);
  }
  return cache;
}
