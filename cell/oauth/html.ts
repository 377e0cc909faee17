/** The small HTML pages of the authorization server: login, consent, device approval, results. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);
}

export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}
label{display:block;margin:.8rem 0 .2rem}input[type=text],input[type=password]{width:100%;padding:.5rem;font-size:1rem}
button{margin:1rem .5rem 0 0;padding:.5rem 1.2rem;font-size:1rem}ul.scopes li{font-family:monospace}.err{color:#a00}</style>
</head><body><h1>${esc(title)}</h1>
${body}
</body></html>`;
}

export function hidden(fields: Record<string, string | undefined>): string {
  return Object.entries(fields)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('\n');
}

export function scopeList(scope: readonly string[]): string {
  return `<ul class="scopes">${scope.map((s) => `<li>${esc(s)}</li>`).join('')}</ul>`;
}
