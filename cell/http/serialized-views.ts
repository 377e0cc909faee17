/**
 * The JSON text of a view, built once per cached object and answered as
 * `c.json` would answer it. A GET of a stored record served from a cache (an
 * API key by id, the caller of `whoami`) hands back the same row or context
 * object until a write empties the cache; its view is then the same bytes,
 * and building it again (the view object, ISO times, `JSON.stringify`) was a
 * tenth of such a request's CPU (issue 40). The text is kept beside the
 * object (a WeakMap: it goes when the cache lets the object go) and reused
 * only while the object it was built from, and the second object it depends
 * on (`dep`, compared by identity), are the ones given; nothing else of the
 * request goes in. Every gate still runs: this is the handler's last step.
 *
 * @example
 * const views = new SerializedViews((row: KeyRow) => keyView(row));
 * return views.answer(c, row, undefined, 200);
 */
import type { Context, TypedResponse } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { JSONParsed } from 'hono/utils/types';

/** The header `c.json` gives an answer. */
const JSON_TYPE = { 'Content-Type': 'application/json' } as const;

export class SerializedViews<K extends object, D, V> {
  readonly #texts = new WeakMap<K, { dep: D; text: string }>();

  /** `view` must be a pure function of `key` and `dep`: its text is reused for as long as both are the same objects. */
  constructor(private readonly view: (key: K, dep: D) => V) {}

  /** The view's JSON text, built the first time `key` is seen with `dep`. */
  text(key: K, dep: D): string {
    const hit = this.#texts.get(key);
    if (hit !== undefined && hit.dep === dep) return hit.text;
    const text = JSON.stringify(this.view(key, dep));
    this.#texts.set(key, { dep, text });
    return text;
  }

  /** The answer `c.json(view(key, dep), status)` gives: the same bytes and Content-Type, typed the same. */
  answer<U extends ContentfulStatusCode>(c: Context, key: K, dep: D, status: U): Response & TypedResponse<JSONParsed<V>, U, 'json'> {
    // The one cast: c.body's answer carries the text c.json would have built from the same view.
    return c.body(this.text(key, dep), status, JSON_TYPE) as unknown as Response & TypedResponse<JSONParsed<V>, U, 'json'>;
  }
}
